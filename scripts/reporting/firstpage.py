"""
scripts/reporting/firstpage.py — the first page of REPORT.md, right after the title: the
machine in one line, the headline figure (speedup against workers for every strategy
family, drawn by scripts/plot.sh from headline_points()), the best configuration per
strategy, and up to ten findings, each one sentence computed from the data and linked to
the section it comes from. A reader who stops here has the answer.

Where the numbers come from: each family's sweep CSV (FAMILIES), its speedups against the
serial rows of the same CSV at the same batch; the per-round core bound from the bench
scripts' DIR/bench-{mpi,openmp,hybrid,cnn}-bounds.csv and the openmp sweep's openmp-bounds.csv (BOUNDS:
every round's bound and same-round speedup for P ranks x 1 thread or 1 rank x T threads; the
figure draws the median bound of the program at those worker counts, and "fraction of the
core bound" is the median over the rounds of speedup / bound of the same configuration: the
program, variant, workers and batch of the row, with that configuration's own median bound
and median speedup in those rounds, "not measured" when no bench round ran it); PyTorch from any CSV's pytorch rows at the same
batch and training-set size; seconds to the target accuracy from DIR/tta.csv (column
`seconds_to_target`), "not measured" when it is absent. PyTorch beside a configuration: the
pytorch rows of the same network (`hidden`), batch, image size and training-set size.
"""

import collections
import os
import re

import partrain
import tta_sweep
from reporting.common import Agg, med, num, plural, x

# family, its sweep CSV, its baseline program (the CNN is its own 1 x 1)
FAMILIES = (("openmp", "openmp.csv", "serial"), ("mpi", "mpi-strong.csv", "serial"),
            ("hybrid", "hybrid-grid.csv", "serial"), ("cnn", "cnn-timing.csv", "cnn"))
HEADLINE_BATCH = "64"
BOUNDS = ("bench-mpi-bounds.csv", "bench-openmp-bounds.csv", "openmp-bounds.csv",   # bench_tables.py --bounds
          "bench-hybrid-bounds.csv", "bench-cnn-bounds.csv")                        # (openmp-bounds: the sweep's)


def bound_rounds(inp, program, ranks, threads, batch, variant=None):
    """[(speedup, bound)] of every round in which a bench script measured PROGRAM's core
    bound at RANKS x THREADS and BATCH (VARIANT's rounds only, or any variant's: the bound is
    the cores' speed, not the strategy's; a row without a variant, as cnn-bench wrote before it
    named its one, counts as VARIANT's), [] when none did"""
    out = []
    for name in BOUNDS:
        path = inp.path(name)
        if not os.path.isfile(path):
            continue
        for r in partrain.read_csv(path, errors="replace"):
            if (r.get("trainer"), r.get("ranks"), r.get("threads"), r.get("batch")) == \
                    (program, str(ranks), str(threads), str(batch)) and variant in (None, r.get("variant") or variant):
                sp, b = num(r.get("speedup")), num(r.get("bound"))
                if sp and b:
                    out.append((sp, b))
    return out


def core_bound(inp, a, own=False):
    """(median bound, median fraction speedup / bound, median speedup) over the bench rounds
    of A's program at A's ranks x threads and batch (OWN: of A's variant alone, so that the
    fraction is A's own), or (None, None, None)"""
    rounds = bound_rounds(inp, a.program, a.ranks, a.threads, a.batch, a.variant if own else None)
    if not rounds:
        return None, None, None
    return med([b for _, b in rounds]), med([sp / b for sp, b in rounds]), med([sp for sp, _ in rounds])


def batch_of(rows):
    """batch 64 when the rows have it, else their most common batch"""
    batches = collections.Counter(r.get("batch", "") for r in rows)
    if not batches:
        return None
    return HEADLINE_BATCH if HEADLINE_BATCH in batches else batches.most_common(1)[0][0]


def configs(rows):
    """Agg per (variant, ranks, threads) of ROWS"""
    by = collections.defaultdict(list)
    for r in rows:
        by[(r.get("variant", ""), r.get("ranks", ""), r.get("threads", ""))].append(r)
    return [Agg(v, v[0].get("_file", "")) for v in by.values()]


def family_points(inp, family, csv_name, base_program):
    """{"batch", "serial": Agg, "points": [(workers, speedup, bound or None, Agg)]} of one
    family (the fastest configuration at each worker count), or None without data"""
    rows = inp.rows(csv_name) or []
    fam = [r for r in rows if r.get("program") == family]
    b = batch_of(fam)
    if b is None:
        return None
    fam = [r for r in fam if r.get("batch") == b]
    if base_program == family:
        base = [r for r in fam if int(num(r.get("ranks")) or 1) * int(num(r.get("threads")) or 1) == 1]
    else:
        base = [r for r in rows if r.get("program") == base_program and r.get("batch") == b]
    serial = Agg(base, csv_name) if base else None
    if serial is None or not serial.epoch:
        return None
    best = {}
    for a in configs(fam):
        w = a.ranks * a.threads
        if a.epoch and (w not in best or a.epoch < best[w].epoch):
            best[w] = a
    pts = []
    for w in sorted(best):
        a = best[w]
        pts.append((w, serial.epoch / a.epoch, core_bound(inp, a)[0], a))
    return {"batch": b, "serial": serial, "points": pts, "csv": csv_name} if pts else None


def headline_points(inp):
    """{family: family_points()} for every family with data, in FAMILIES' order"""
    out = {}
    for fam, csv_name, base in FAMILIES:
        p = family_points(inp, fam, csv_name, base)
        if p:
            out[fam] = p
    return out


def config_label(a):
    if a.program == "openmp":
        return f"--accum {a.variant}, T = {a.threads}"
    if a.program == "mpi":
        return f"--sync {a.variant}, P = {a.ranks}"
    return f"{a.variant}, P × T = {a.ranks} × {a.threads}"


def pytorch_epoch(inp, a):
    """the fastest PyTorch configuration's median epoch for the same network (hidden: the MLP's
    layers or the CNN's), batch, image size and training-set size as A"""
    r0 = a.rows[0]
    rows = [r for r in inp.all_rows() if r.get("program") == "pytorch"
            and all(r.get(k) == r0.get(k) for k in ("hidden", "batch", "image_size", "train_n"))]
    aggs = [a for a in configs(rows) if a.epoch]
    return min(aggs, key=lambda a: a.epoch) if aggs else None


def seconds_to_target(inp, program):
    """(median seconds to the target over the seeds, target, batch) of PROGRAM's fastest
    configuration and batch in DIR/tta.csv, or None"""
    rows = [r for r in inp.rows("tta.csv") or [] if r.get("program") == program
            and num(r.get("seconds_to_target")) is not None]
    by = collections.defaultdict(list)
    for r in rows:
        by[(r.get("variant"), r.get("ranks"), r.get("threads"), r.get("batch"))].append(r)
    best = None
    for v in by.values():
        t = partrain.col_median(v, "seconds_to_target")
        if t is not None and (best is None or t < best[0]):
            best = (t, v[0].get("target_accuracy", "?"), v[0].get("batch", "?"))
    return best


def secs(t):
    """seconds to target: one decimal from 1 s, three significant digits below"""
    return f"{t:.1f}" if t >= 1 else f"{t:.3g}"


def anchor(heading):
    """GitHub's anchor of a markdown heading"""
    t = re.sub(r"[^\w\- ]", "", heading.lstrip("#").strip().lower())
    return "#" + t.replace(" ", "-")


def section_link(headings, *words):
    """a link to the first section heading that contains one of WORDS, or '' """
    for w in words:
        for h in headings:
            if w.lower() in h.lower():
                return f" ([{h.lstrip('#').strip()}]({anchor(h)}))"
    return ""


def firstpage(d, machine, headings, compare=None):
    """the first page into D; MACHINE: the run's machine.json dict; HEADINGS: the '## '
    lines of the sections that follow (for the findings' links); COMPARE: a callable that
    adds the "Against the reference" section, or None"""
    from reporting.machine import one_line
    i = d.i
    d.add("## The answer on one page", "")
    d.para(f"**Machine:** {one_line(machine)} (the run's `machine.json`; all of it under [Machine]"
           f"({anchor('## Machine')})).")
    pts = headline_points(i)
    d.para(i.figure("headline.png", "speedup against workers for every strategy family, with the ideal line"))
    if pts:
        d.para("The figure: each family's fastest configuration at each worker count (threads T, ranks P or P × T) "
               "at batch " + ", ".join(sorted({p['batch'] for p in pts.values()})) + "; speedup over serial/serial "
               "in the same sweep (the CNN over its own 1 × 1); the dotted line is the ideal (speedup = workers)"
               + ("; dashed lines the per-round core bound." if any(b for p in pts.values() for _, _, b, _ in p["points"])
                  else "; no benchmark of this run measured the per-round core bound (bench-mpi-bounds.csv, "
                       "bench-openmp-bounds.csv, bench-hybrid-bounds.csv, bench-cnn-bounds.csv)."))
    rows, best_of = [], {}
    ser_any = next((p["serial"] for p in pts.values() if p["serial"].program == "serial"), None)
    if ser_any:
        torch = pytorch_epoch(i, ser_any)
        tta = seconds_to_target(i, "serial")
        rows.append(("serial", f"{ser_any.variant}, batch {ser_any.batch}", "1.00×", "–",
                     x(torch.epoch / ser_any.epoch) if torch else "no PyTorch run at this batch",
                     f"{secs(tta[0])} s (≥ {tta[1]}%, batch {tta[2]})" if tta else "not measured"))
    for fam, p in pts.items():
        w, sp, bound, a = max(p["points"], key=lambda q: q[1])
        best_of[fam] = (w, sp, bound, a, p)
        torch = pytorch_epoch(i, a)
        tta = seconds_to_target(i, fam)
        bound, fraction, bench_sp = core_bound(i, a, own=True)
        rows.append((fam, f"{config_label(a)}, batch {a.batch}", x(sp),
                     f"{fraction:.2f} (bench rounds: {bench_sp:.2f}× of {bound:.2f}×)" if fraction else "not measured",
                     x(torch.epoch / a.epoch) if torch else "no PyTorch run at this batch",
                     f"{secs(tta[0])} s (≥ {tta[1]}%, batch {tta[2]})" if tta else "not measured"))
    d.add("### The best configuration per strategy", "")
    if rows:
        d.table(["strategy", "configuration", "speedup over serial", "fraction of the core bound",
                 "vs PyTorch (its time / this)", "seconds to target"], rows)
        if not i.rows("tta.csv"):
            d.para("Seconds to the target accuracy: not measured in this run (`tta.csv` missing).")
    else:
        d.para("No strategy sweep in this run (openmp.csv, mpi-strong.csv, hybrid-grid.csv, cnn-timing.csv "
               "all missing or without a serial baseline).")
    if compare:
        compare(d)
    found = findings(i, machine, pts, best_of, headings)
    if found:
        d.add("### Findings", "")
        d.add(*[f"{n}. {t}" for n, t in enumerate(found[:10], 1)], "")


def findings(i, machine, pts, best_of, headings):
    """up to ten sentences, each computed from the data and linked to its section"""
    out = []
    link = {"openmp": section_link(headings, "Seed report 000", "Scaling"),
            "mpi": section_link(headings, "Scaling", "MPI"),
            "hybrid": section_link(headings, "Seed report 004", "Scaling"),
            "cnn": section_link(headings, "Seed report 003")}
    if best_of:
        fam, (w, sp, _, a, p) = max(best_of.items(), key=lambda kv: kv[1][1])
        out.append(f"The fastest strategy is {fam} ({config_label(a)}): {sp:.2f}× serial's speed at batch "
                   f"{p['batch']} with {plural(w, 'worker')}{link.get(fam, '')}.")
    for fam, (w, sp, bound, a, p) in best_of.items():
        top = max(q[0] for q in p["points"])
        if w < top:
            last = next(q for q in p["points"] if q[0] == top)
            out.append(f"{fam} peaks at {plural(w, 'worker')} ({sp:.2f}×); at {top} it is {last[1]:.2f}×, so "
                       f"more workers stop paying{link.get(fam, '')}.")
        else:
            out.append(f"{fam} reaches {sp:.2f}× at {plural(w, 'worker')}, {100 * sp / w:.0f}% of the ideal "
                       f"{w}×{link.get(fam, '')}.")
        bound, fraction, bench_sp = core_bound(i, a, own=True)
        if fraction:
            out.append(f"{fam} at {plural(w, 'worker')} reaches {fraction:.2f} of its per-round core bound "
                       f"({bench_sp:.2f}× of {bound:.2f}×: what these cores allowed in the bench rounds, measured "
                       f"beside it){link.get(fam, '')}.")
    ser = next((p["serial"] for p in pts.values() if p["serial"].program == "serial"), None)
    if ser:
        torch = pytorch_epoch(i, ser)
        if torch:
            ratio = torch.epoch / ser.epoch
            out.append(f"serial/serial takes {ser.epoch:.3g} s per epoch at batch {ser.batch}, PyTorch "
                       f"{torch.epoch:.3g} s: ours is {ratio:.2f}× PyTorch's speed"
                       f"{section_link(headings, 'What else would you use', 'PyTorch')}.")
    tta = i.rows("tta.csv") or []
    if tta:   # the time-to-accuracy section's own rule (scripts/tta_sweep.py stops_falling), per side
        try:
            diverged = tta_sweep.read_diverged(i.path("tta-diverged.txt"))
        except (ValueError, OSError):
            diverged = []
        summ = tta_sweep.summary(tta, diverged)
        for side in ("serial", "best"):
            pts = [(b, v[side]["seconds"][0] if side in v and v[side]["reached"] else None) for b, v in summ.items()]
            stop = tta_sweep.stops_falling(pts)
            if stop is None:
                continue
            name = next(v[side]["label"] for v in summ.values() if side in v)
            b, b_min, s_min = stop
            never = sorted(b_ for b_, t in pts if t is None)
            out.append(f"Time to {tta[0].get('target_accuracy', '?')} % test accuracy ({name}) is shortest at batch "
                       f"{b_min:,} ({s_min:.3g} s); "
                       + (f"bigger batches stop paying at batch {b:,}, the smallest within "
                          f"{tta_sweep.WITHIN:.0%} of that" if b != b_min or b_min != min(summ) else
                          "no batch above the smallest measured one paid")
                       + (f"; batch {', '.join(f'{x:,}' for x in never)} never reached it (diverged or capped)"
                          if never else "")
                       + section_link(headings, "Time to accuracy") + ".")
    lat = machine.get("c2c_latency_ns")
    if isinstance(lat, (int, float)):
        out.append(f"A cache line's round trip from one core to another on this machine takes {lat:.0f} ns "
                   f"(bench/c2c, median), the floor of every per-step synchronisation{section_link(headings, 'Machine')}.")
    k = partrain.n_disturbed(i.all_rows())
    if k:
        out.append(f"{plural(k, 'result row')} of this run met outside load (marked disturbed); the medians "
                   f"that include them may be slower than the machine can go{section_link(headings, 'Which timing')}.")
    return out
