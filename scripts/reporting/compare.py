"""
scripts/reporting/compare.py — `report.py --compare REFDIR`: this run's time per epoch beside
a reference run's (results/reference/, committed) for every configuration both have, so a
user sees how their machine compares. The section "Against the reference" on the first page
shows the summary and the configurations of the best-per-strategy table; DIR/compare.csv has
every one.

A configuration: program, variant, ranks, threads, batch, dataset, image size and the
training-set size (an epoch over 1,000 samples is no measure of one over 60,000: a quick
or smoke run shares nothing with a full reference, and says so). Each side's time is the
median over its repeated runs of the configuration (every CSV of the directory).
"""

import collections
import csv
import glob
import os

from reporting.common import Inputs, med, num, plural, table
from reporting.header import read_machine
from reporting.machine import one_line

KEY = ("program", "variant", "ranks", "threads", "batch", "dataset", "image_size", "train_n")
CSV_COLUMNS = ("trainer",) + KEY[1:] + ("epoch_seconds_here", "epoch_seconds_reference", "ratio_here_over_reference")
SHOWN = 12   # rows of the report's table; compare.csv has all


def bad_refdir(refdir):
    """the one line saying why REFDIR cannot be compared against, or None"""
    if not os.path.isdir(refdir):
        return f"--compare {refdir}: no such directory"
    if not glob.glob(os.path.join(refdir, "*.csv")):
        return f"--compare {refdir}: no result CSVs in it (a run_all.sh results directory, e.g. results/reference)"
    return None


def medians(inp):
    """{KEY tuple: median epoch seconds} over every CSV of a results directory"""
    by = collections.defaultdict(list)
    for r in inp.all_rows():
        if r.get("_file") == "compare.csv":
            continue
        v = num(r.get("epoch_seconds_median"))
        if v is not None and v > 0:
            by[tuple(r.get(k, "") for k in KEY)].append(v)
    return {k: med(v) for k, v in by.items()}


def pairs(here_inp, ref_inp):
    """([(key, here s, reference s, ratio)], only here, only there)"""
    here, there = medians(here_inp), medians(ref_inp)
    both = sorted(set(here) & set(there), key=lambda k: (k[0], k[1], int(num(k[2]) or 0), int(num(k[3]) or 0),
                                                         int(num(k[4]) or 0), k[5], k[6], k[7]))
    return [(k, here[k], there[k], here[k] / there[k]) for k in both], len(set(here) - set(there)), \
        len(set(there) - set(here))


def write_csv(path, got):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        for k, h, t, r in got:
            w.writerow(list(k) + [f"{h:.6g}", f"{t:.6g}", f"{r:.4f}"])
    os.replace(tmp, path)


def compare_section(refdir):
    """the section function for report.py (it takes the Doc); writes DIR/compare.csv"""
    def section(d):
        i = d.i
        ref = Inputs(refdir, refdir, i.out)
        got, only_here, only_there = pairs(i, ref)
        write_csv(i.path("compare.csv"), got)
        d.add("### Against the reference", "")
        name = os.path.basename(os.path.abspath(refdir))
        d.para(f"This run beside the reference run `{name}/` (`report.py --compare`): time per epoch here, there, "
               "and here / there (below 1: this machine is faster). All "
               f"{plural(len(got), 'configuration')} both have are in `compare.csv`; "
               f"{only_here} configuration(s) only this run has and {only_there} only the reference has are "
               "counted, not listed (a configuration includes the training-set size, so a quick or smoke run "
               "shares none with a full one).")
        d.para(f"Here: {one_line(read_machine(i.dir))}. Reference: {one_line(read_machine(refdir))}.")
        if not got:
            return
        ratios = [r for _, _, _, r in got]
        d.para(f"Ratio here / reference: median {med(ratios):.2f}, from {min(ratios):.2f} to {max(ratios):.2f} "
               f"over {plural(len(got), 'configuration')}.")
        shown = sorted(got, key=lambda g: -abs(g[3] - 1))[:SHOWN] if len(got) > SHOWN else got
        rows = [(f"{k[0]} {k[1]}", f"{k[2]} × {k[3]}", f"batch {k[4]}, {k[5]} {k[6]} px, {k[7]} samples",
                 f"{h:.3g} s", f"{t:.3g} s", f"{r:.2f}") for k, h, t, r in shown]
        if len(got) > SHOWN:
            d.para(f"The {SHOWN} configurations furthest from the reference (all of them in `compare.csv`):")
        d.add(*table(["configuration", "ranks × threads", "batch, data", "here", "reference", "here / reference"],
                     rows), "")
    section.__name__ = "compare"
    return section
