"""
scripts/reporting/timelines.py — the section "Timelines": one traced step of each strategy
(run_all.sh's timelines step: a short run per strategy with --trace; the figures
timeline-NAME.png by scripts/timeline.py) and, per strategy, each rank's step split into
compute, communication, waiting and update with its synchronisations per step, from
DIR/trace-summary.csv (scripts/trace_summary.py --csv; docs/tracing-figures.md).
"""

import os
import sys

import partrain
from reporting.common import PROG, num, pct

# run_all-steps.sh's TRACE_RUNS, in its order: the pairs to compare sit side by side
ORDER = ("serial", "openmp-critical", "openmp-reduction", "mpi-allreduce", "mpi-reduce-bcast", "mpi-overlap",
         "pipeline", "hybrid")
NEED = ("strategy", "trainer", "variant", "ranks", "threads", "rank", "steps", "step_s", "data_s", "compute_s",
        "comm_s", "wait_s", "update_s", "other_s", "syncs_per_step", "workers_wait_s", "waited_for",
        "above_median_pct", "others_waited_s")


def us(v):
    return "–" if v is None else f"{v:.1f}"


def read(i):
    """{strategy: [rank rows with numbers]} from trace-summary.csv; None (the missing line
    written) when it is missing or unreadable"""
    path = i.path("trace-summary.csv")
    if not os.path.isfile(path):
        return None
    try:
        rows = partrain.read_csv(path, need=NEED, errors="replace")
    except partrain.CSVError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        i.bad_inputs += 1
        return None
    out = {}
    for r in rows:
        steps = num(r["steps"])
        vals = {k: num(r[k]) for k in ("step_s", "data_s", "compute_s", "comm_s", "wait_s", "update_s", "other_s",
                                       "syncs_per_step", "workers_wait_s")}
        if not steps or steps <= 0 or any(v is None for v in vals.values()):
            print(f"{PROG}: {path}: line {r['_line']}: steps or a seconds column is not a number; row left out",
                  file=sys.stderr)
            i.bad_inputs += 1
            continue
        per = {k[:-2]: v / steps * 1e6 for k, v in vals.items() if k.endswith("_s")}   # µs per step
        out.setdefault(r["strategy"], []).append({**r, **per, "syncs": vals["syncs_per_step"], "n": int(steps)})
    return out


def ordered(names):
    return [n for n in ORDER if n in names] + sorted(n for n in names if n not in ORDER)


def timelines(d):
    i = d.i
    d.add("## Timelines", "")
    data = read(i)
    if data is None:
        d.para(i.missing("trace-summary.csv"))
        return
    if not data:
        d.para(f"not measured in this run: {i.path('trace-summary.csv')} has no rows")
        return
    d.para("One short run per strategy with `--trace` (batch 64, the first 50 training steps traced; "
           "docs/tracing-figures.md). Each figure is one typical step (the median-duration step after the first "
           "10), one row per rank × thread; each table gives every rank's mean per traced step in µs: the step, "
           "and the top-level spans of its thread 0 by category (compute: forward, backward, loss; comm: MPI "
           "calls; wait: MPI_Wait, barriers, critical sections, window syncs, pipeline idle), and the "
           "synchronisations (comm and wait spans) per step. Open the traces themselves "
           f"(`{i.path('traces')}/*.json`) in Perfetto or chrome://tracing.")
    for name in ordered(data):
        rs = data[name]
        r0 = rs[0]
        d.add(f"### {name}", "")
        d.add(i.figure(f"timeline-{name}.png", f"{name}: one step, every rank and thread"), "")
        d.table(["rank", "step µs", "compute µs", "comm µs", "wait µs", "update µs", "syncs per step"],
                [[r["rank"], us(r["step"]), us(r["compute"]), us(r["comm"]), us(r["wait"]), us(r["update"]),
                  f"{r['syncs']:.1f}"] for r in rs])
        notes = [f"{r0['trainer']} {r0['variant']}, {r0['ranks']} rank(s) × {r0['threads']} thread(s), "
                 f"{r0['n']} traced steps."]
        workers = sum(r["workers_wait"] for r in rs)
        if workers > 0:
            notes.append(f"Its worker threads waited {us(workers)} µs per step in all (barriers, critical sections).")
        if r0["waited_for"] not in ("", "none"):
            notes.append(f"The others waited for rank {r0['waited_for']}: its compute is "
                         f"{num(r0['above_median_pct']):.0f} % above the median rank's; the others spent "
                         f"{num(r0['others_waited_s']):.3f} s longer in comm and wait than it did.")
        d.para(" ".join(notes))
    d.shows(sentences(data))


def share(rs, *cats):
    """the mean over ranks of CATS' share of the step, in %"""
    vals = [sum(r[c] for c in cats) / r["step"] * 100 for r in rs if r["step"] > 0]
    return sum(vals) / len(vals) if vals else 0.0


def sentences(data):
    out = []
    names = ordered(data)
    syncs = {n: share(data[n], "comm", "wait") for n in names}
    many = [n for n in names if data[n][0]["ranks"] != "1" or data[n][0]["threads"] != "1"]
    if many:
        most = max(many, key=lambda n: syncs[n])
        least = min(many, key=lambda n: syncs[n])
        rs = data[most]
        s = (f"Of the parallel strategies, {most} spends the largest share of its step communicating or waiting: "
             f"{pct(syncs[most], 1)} ({us(sum(r['comm'] + r['wait'] for r in rs) / len(rs))} µs per step, "
             f"{sum(r['syncs'] for r in rs) / len(rs):.1f} synchronisations per step, the ranks' mean)")
        if least != most:
            s += f"; {least} the smallest, {pct(syncs[least], 1)}"
        out.append(s + ".")
    parts = []
    for n in names:
        rs = data[n]
        cats = {c: share(rs, c) for c in ("data", "compute", "comm", "wait", "update", "other")}
        top = max((c for c in cats if c != "compute"), key=lambda c: cats[c])
        parts.append(f"{n} {pct(cats['compute'])} compute, then {top} {pct(cats[top])}"
                     f" of {us(sum(r['step'] for r in rs) / len(rs))} µs")
    out.append("Where the step goes: " + "; ".join(parts) + ".")
    for a, b in (("openmp-critical", "openmp-reduction"),):
        if a in data and b in data:
            sa, sb = (sum(r["step"] for r in data[k]) / len(data[k]) for k in (a, b))
            wa, wb = (sum(r["workers_wait"] + r["wait"] for r in data[k]) for k in (a, b))
            out.append(f"{a} takes {us(sa)} µs per step against {b}'s {us(sb)} µs; their threads wait "
                       f"{us(wa)} and {us(wb)} µs per step in all.")
    mpis = [n for n in ("mpi-allreduce", "mpi-reduce-bcast", "mpi-overlap") if n in data]
    if len(mpis) > 1:
        step = {n: sum(r["step"] for r in data[n]) / len(data[n]) for n in mpis}
        fast = min(mpis, key=lambda n: step[n])
        out.append("Among the MPI exchanges " + ", ".join(f"{n} {us(step[n])} µs" for n in mpis)
                   + f" per step: {fast} is the shortest.")
    waited = [f"{n} (rank {data[n][0]['waited_for']})" for n in names if data[n][0]["waited_for"] not in ("", "none")]
    if waited:
        out.append("The other ranks waited for one rank in " + ", ".join(waited) + ".")
    loose = [f"{n} ({pct(share(data[n], 'other'))})" for n in names if share(data[n], "other") > 2]
    if loose:
        out.append("The spans leave more than 2 % of the step unmarked in " + ", ".join(loose) + ".")
    return out
