"""
scripts/reporting/seed003.py — seed report 003 (Senay, "Distributed CNN using OpenMP and
MPI"): its Tables 3, 4, 5 (scripts/cnn_tables.py's, from DIR/cnn-table{3,4,5}.md, or built
from the CSVs when only those exist) and its speedup-vs-cores figure, with the sentences
that compare.
"""

import re

import cnn_tables
from reporting.common import agg, g, num, pct, s, select, x
from seeds import SEED003

S = SEED003
NAMES = ["cnn-table3.md", "cnn-table4.md", "cnn-table5.md"]


def seed003(d):
    d.add("## Seed report 003", "")
    d.para("Senay (Addis Ababa University, \"Distributed CNN using OpenMP and MPI\") trained a one-convolution "
           f"CNN (8 filters 3×3, max-pool, dense 1352→10) on MNIST with {S['ranks']} MPI ranks × OpenMP over (sample × "
           f"filter), {S['batch_per_rank']} samples per rank, on an Apple M4, and reported loss/accuracy per epoch "
           f"(Table 3), serial vs distributed time (Table 4: {g(S['serial_seconds'])} vs {g(S['distributed_seconds'])}, "
           f"{x(S['serial_seconds'] / S['distributed_seconds'])}), convergence (Table 5) and "
           "speedup vs cores (Figures 1–2).")
    texts = table_texts(d.i)
    for n in NAMES:
        t = texts[n]
        if not t:
            d.add(f"### {n.replace('cnn-table', 'Table ').replace('.md', '')}", "")
            d.para(d.i.missing(n))
            continue
        lines = t.rstrip("\n").splitlines()
        if lines and lines[0].startswith("# "):
            lines[0] = "### " + re.sub(r"^# Seed report 003, ", "", lines[0])
        d.embed(lines, "seed003-" + n.replace("cnn-", "").replace(".md", ""), drop=("OMP_WAIT_POLICY", "cores used"))
    d.add("### Figures 1–2 — speedup vs cores", "")
    d.add(d.i.figure("cnn-speedup.png", "cnn/cnn: speedup vs cores, with seed report 003's"), "")
    d.shows(timing_sentences(d) + accuracy_sentences(d))


def table_texts(i):
    """the three tables' markdown: the files of the run, else built from the CSVs"""
    texts = {n: i.text(n) for n in NAMES}
    acc, tim = i.rows("cnn-accuracy.csv"), i.rows("cnn-timing.csv")
    if not all(texts.values()) and acc is not None and tim is not None:
        acc = [r for r in acc if r.get("program") == "cnn"]
        tim = [r for r in tim if r.get("program") == "cnn"]
        try:
            mds = cnn_tables.tables(acc, tim, i.cores)[0] if acc or tim else {}
        except (ValueError, KeyError, TypeError, ZeroDivisionError):   # rows it cannot use: no tables
            mds = {}
        for n in NAMES:
            texts[n] = texts[n] or ("\n".join(mds[n]) + "\n" if n in mds else None)
    return texts


def timing_sentences(d):
    i, cores = d.i, d.cores
    tim = i.rows("cnn-timing.csv")
    if tim is None:
        d.para(i.missing("cnn-timing.csv"))
        return []
    sent = []
    base = agg(tim, program="cnn", ranks=1, threads=1)
    others = [agg(tim, program="cnn", ranks=p, threads=t) for p, t in {(int(r["ranks"]), int(r["threads"]))
                                                                        for r in tim} if (p, t) != (1, 1)]
    others = [a for a in others if a and a.total]
    if not (base and base.total and others):
        return sent
    rep_sp = S["serial_seconds"] / S["distributed_seconds"]
    top = min(others, key=lambda a: a.total)
    sp = base.total / top.total
    used = min(top.ranks * top.threads, cores)
    sent.append(f"Our best configuration, {top.cfg()} ranks × threads, runs {top.epochs} epochs of "
                f"{int(num(top.train_n) or 0):,} images in {s(top.total)} vs {s(base.total)} for 1×1: "
                f"{x(sp)} on {used} cores, {pct(100 * sp / used)} parallel efficiency, against the "
                f"report's {x(rep_sp)} on {S['ranks']} ranks ({pct(100 * rep_sp / S['ranks'])}).")
    work = (num(base.epochs) or 0) * (num(base.train_n) or 0)
    full = S["epochs"] * S["train"]
    if work:
        scaled = base.total * full / work
        sent.append(f"Scaled to the report's {S['epochs']} epochs of {S['train']:,} images, our 1×1 would take "
                    f"{s(scaled)} where the report's serial code took {g(S['serial_seconds'])} "
                    f"({S['serial_seconds'] / scaled:.0f}× less"
                    f"{'; measured on ' + format(int(work), ',') + ' image-epochs only' if work < full else ''}).")
    return sent


def accuracy_sentences(d):
    i = d.i
    acc = i.rows("cnn-accuracy.csv")
    if acc is None:
        d.para(i.missing("cnn-accuracy.csv"))
        return []

    def last(p, t, b):
        r = select(acc, program="cnn", ranks=p, threads=t, batch=b)
        return num(max(r, key=lambda r_: r_.get("timestamp", ""))["test_accuracy"]) if r else None
    b, p = S["batch_per_rank"], S["ranks"]
    ser, glob2, per = last(1, 1, b), last(2, 2, b), last(p, 1, p * b)
    if ser is None or per is None:
        return []
    diff = per - ser
    rep = f"{S['distributed'][-1][1] - S['serial'][-1][1]:.2f}".replace("-", "−")
    sent = (f"With the report's {b} samples per rank, {p} ranks end {abs(diff):.2f} points "
            f"{'below' if diff < 0 else 'above'} serial ({pct(per, 2)} vs {pct(ser, 2)}; the report: {rep})")
    if glob2 is not None:
        sent += (f", while the global batch of {b} on 2×2 ends {abs(glob2 - ser):.2f} points from "
                 f"serial" + (f": the loss comes from {p}× fewer SGD steps per epoch, not from "
                              "distribution." if abs(glob2 - ser) <= 0.2 else
                              ", more than float rounding of the split sums explains."))
    else:
        sent += "."
    return [sent]
