#!/usr/bin/env python3
"""
scripts/report.py — results/REPORT.md assembled from whatever a run left behind.

  report.py [--results DIR] [--plots PLOTDIR] [--out FILE] [--compare REFDIR]
      --results DIR    the CSVs, hyperfine JSON, generated tables and skipped.txt of one
                       run_all.sh run (default results)
      --plots PLOTDIR  where that run's PNGs are (default DIR/plots when it exists, else
                       plots; run_all.sh keeps them in DIR/plots, or DIR itself for
                       --quick and --smoke)
      --out FILE       the report (default DIR/REPORT.md)
      --compare REFDIR this run's time per epoch beside REFDIR's (e.g. results/reference)
                       for every configuration both have: the first page's "Against the
                       reference" and DIR/compare.csv; a REFDIR that is missing or holds
                       no CSV: one line, exit 2, nothing written

Sections (one module each in scripts/reporting/): the title (the run's date, or "assembled
from N runs" with the list), the first page (firstpage.py: the machine in one line, the
headline figure, the best configuration per strategy, findings), the machine (the run's
DIR/machine.json; probed now, and said so, when it lacks them), one section per seed report (/work/shared/seeds 000..004) with its
tables and figures regenerated from our measurements and the report's own published
numbers (scripts/seeds.py) beside ours, MPI scaling, MPI+MPI (shared-memory windows) vs
MPI+OpenMP, the performance model (scripts/model.py), the GPU (scripts/gpu-check.sh's
DIR/gpu/summary.csv, when present), time to accuracy against the global batch
(DIR/tta.csv), one traced step of each strategy (timelines), PyTorch side by side, what was
skipped, and which timing is which. Every section with numbers ends with a "What this
shows" paragraph computed from those numbers.

Reads every CSV strictly by column name (scripts/partrain.py; schema: RESULTS_HEADER in
common/results.h); an input that is missing gives the line "not measured in this run:
FILE missing (step S skipped: REASON)" with the reason from DIR/skipped.txt (lines
"STEP<TAB>reason") when it has one, and the report goes on; the step ids are checked
against `./run_all.sh --list-steps`. Variants are ordered and named as the programs'
`--list-variants` says (the data's own order, with a note, where a program is not built).
Repeated runs of one configuration are summarised by their median and counted. Seed
report 003's tables are scripts/cnn_tables.py's (DIR/cnn-table{3,4,5}.md, or built from
the CSVs when only those exist).
Exit status: 0; 2 on a usage error or when FILE cannot be written, and 2 (the report
written all the same) when an input was left out or a section could not be completed:
one line each on stderr naming the file and line (a CSV that cannot be read, a row with
a count or figure that is not finite: train_n=inf), no traceback.
Python 3 standard library only.
"""

import argparse
import os
import re
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reporting.common import PROG, Doc, Inputs, check_steps  # noqa: E402
from reporting.gpu import gpu  # noqa: E402
from reporting.compare import bad_refdir, compare_section  # noqa: E402
from reporting.firstpage import firstpage  # noqa: E402
from reporting.header import header, machine_table, run_machine  # noqa: E402
from reporting.model import model  # noqa: E402
from reporting.mpimpi import mpimpi  # noqa: E402
from reporting.pytorch import pytorch  # noqa: E402
from reporting.scaling import scaling  # noqa: E402
from reporting.seed000 import seed000  # noqa: E402
from reporting.seed001 import seed001  # noqa: E402
from reporting.seed002 import seed002  # noqa: E402
from reporting.seed003 import seed003  # noqa: E402
from reporting.seed004 import seed004  # noqa: E402
from reporting.skipped import skipped  # noqa: E402
from reporting.timelines import timelines  # noqa: E402
from reporting.timings import timings  # noqa: E402
from reporting.tta import tta  # noqa: E402

SECTIONS = (seed000, seed001, seed002, seed003, seed004, scaling, mpimpi, timelines, model, gpu, tta, pytorch,
            skipped, timings)


def write(out, text):
    try:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, out)
    except OSError as e:
        print(f"{PROG}: {out}: {e.strerror}", file=sys.stderr)
        return False
    return True


def run_sections(doc, sections):
    """each section into DOC; one that fails gives one line on stderr and a note in its
    place (one broken input must not cost the whole report); the number that failed"""
    failed = 0
    for section in sections:
        mark = len(doc.lines)
        try:
            section(doc)
        except Exception as e:
            failed += 1
            where = traceback.extract_tb(e.__traceback__)[-1]
            print(f"{PROG}: section {section.__name__} not completed: {type(e).__name__}: {e} "
                  f"({os.path.basename(where.filename)}:{where.lineno})", file=sys.stderr)
            del doc.lines[mark + 2:]
            doc.para(f"(this section could not be completed: {type(e).__name__}: {e}; see {PROG}'s stderr)")
    return failed


def relative_paths(text, out, *dirs):
    """TEXT with the absolute paths of DIRS (the results and plots directories) written
    relative to the report's directory: a report names files as a reader beside it finds
    them, never a path of the machine that made it (run_all.sh passes absolute ones)"""
    here = os.path.dirname(os.path.abspath(out))
    for d in sorted({os.path.abspath(d) for d in dirs}, key=len, reverse=True):
        rel = os.path.relpath(d, here)
        text = text.replace(d + "/", "" if rel == "." else rel + "/")
    return text


def main(argv):
    ap = argparse.ArgumentParser(prog=PROG, description="assemble REPORT.md from a run_all.sh results directory")
    ap.add_argument("--results", default="results", metavar="DIR")
    ap.add_argument("--plots", default=None, metavar="PLOTDIR")
    ap.add_argument("--out", default=None, metavar="FILE")
    ap.add_argument("--compare", default=None, metavar="REFDIR")
    a = ap.parse_args(argv)
    results = a.results.rstrip("/") or "/"
    default_plots = os.path.join(results, "plots") if os.path.isdir(os.path.join(results, "plots")) else "plots"
    plots = (a.plots or default_plots).rstrip("/") or "/"
    out = a.out or os.path.join(results, "REPORT.md")
    if a.compare is not None:
        why = bad_refdir(a.compare.rstrip("/") or "/")
        if why:
            print(f"{PROG}: {why}", file=sys.stderr)
            return 2
    if not os.path.isdir(results):
        print(f"{PROG}: note: {results} is not a directory; every input will be reported missing", file=sys.stderr)
    check_steps()
    inp = Inputs(results, plots, out)
    head, body, first = Doc(inp), Doc(inp), Doc(inp)
    failed = run_sections(head, (header,))
    failed += run_sections(body, (machine_table,) + SECTIONS)
    headings = [l for l in body.lines if l.startswith("## ")]
    machine, _ = run_machine(inp)
    compare = compare_section(a.compare.rstrip("/") or "/") if a.compare is not None else None

    def first_page(d):
        firstpage(d, machine, headings, compare)
    first_page.__name__ = "firstpage"
    failed += run_sections(first, (first_page,))
    text = "\n".join(head.lines + first.lines + body.lines).rstrip("\n") + "\n"
    text = re.sub(r"\n{3,}", "\n\n", text)
    text = relative_paths(text, out, results, plots)
    if not write(out, text):
        return 2
    print(f"{PROG}: {out} ({len(text.splitlines())} lines; {len(set(inp.missing_seen))} input(s) missing)")
    if failed or inp.bad_inputs:
        print(f"{PROG}: {failed} section(s) incomplete, {inp.bad_inputs} input file(s) or row(s) left out "
              "(the lines above); the report has the rest", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
