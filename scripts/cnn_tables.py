#!/usr/bin/env python3
"""
scripts/cnn_tables.py — seed report 003's Tables 3, 4 and 5 regenerated with cnn/cnn's
numbers, the report's own numbers beside them (scripts/seeds.py), and the data of its
speedup-vs-cores figure (plots/cnn-speedup.gp). Python 3 standard library only; reads the
CSVs by column name (scripts/partrain.py; schema: common/results.h).

  cnn_tables.py --accuracy CSV --timing CSV --outdir DIR [--dat FILE]

--accuracy: the 5-epoch runs on the MNIST digits at the report's hyperparameters
  (lr 0.01, batch 32), the latest row of each of these configurations:
    serial            1 rank x 1 thread, --batch 32
    global batch      2 ranks x 2 threads, --batch 32 (our semantics: the same SGD steps)
    per-rank batch    2 ranks and 4 ranks x 1 thread, --batch-per-rank 32 (the report's
                      semantics: global batch 64, 128)
--timing: 5-epoch runs on the 60,000 Fashion-MNIST images (the report's workload size:
  60k 28x28 images, 5 epochs) for 1x1, 1x2, 2x1, 2x2; per configuration its rows'
  total_seconds (the training loop with the per-epoch evaluation, as the report's "total
  training time") and epoch_seconds_median by the report's rule (reporting/common.py's
  spread: median (min-max), from 5 runs MLPerf's trimmed mean and the range kept).
Writes DIR/cnn-table3.md, DIR/cnn-table4.md, DIR/cnn-table5.md (markdown) and --dat
(default DIR/cnn-speedup.dat). A configuration without rows is shown as "not run".
scripts/report.py calls tables() directly when only the CSVs are there.
Exit status: 0; 1 when a CSV has no usable row; 2 on a usage or file error.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import partrain  # noqa: E402
from reporting.common import center, spread  # noqa: E402  (the report's one rule for repeated runs)
from seeds import SEED003  # noqa: E402

PROG = "cnn_tables.py"

# seed report 003 (Nahom Senay, "Implementation Report on Distributed CNN using OpenMP
# and MPI", Addis Ababa University, January 2026): MNIST 60k/10k, lr 0.01, batch 32 per
# rank, Apple M4, Apple Clang 16 -O3, OpenMPI 5.0, LLVM libomp.
REPORT_DISTRIBUTED, REPORT_SERIAL = SEED003["distributed"], SEED003["serial"]
REPORT_SERIAL_SECONDS, REPORT_DISTRIBUTED_SECONDS = SEED003["serial_seconds"], SEED003["distributed_seconds"]
REPORT_RANKS, REPORT_EPOCHS, REPORT_BATCH = SEED003["ranks"], SEED003["epochs"], SEED003["batch_per_rank"]


def die(msg, code=2):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(code)


def read(path):
    """cnn/cnn's rows of a CSV"""
    try:
        return [r for r in partrain.read_csv(path) if r.get("program") == "cnn"]
    except partrain.CSVError as e:
        die(str(e))


def curves(row):
    loss = [float(v) for v in row["train_loss_curve"].split(";")]
    acc = [float(v) for v in row["test_acc_curve"].split(";")]
    return list(zip(loss, acc))


def latest(rows, ranks, threads, batch):
    match = [r for r in rows if int(r["ranks"]) == ranks and int(r["threads"]) == threads and int(r["batch"]) == batch]
    return max(match, key=lambda r: r["timestamp"]) if match else None


def fmt_pair(c, e):
    return f"{c[e][0]:.4f} | {c[e][1]:.2f}" if c and e < len(c) else "not run | not run"


def describe(row):
    if not row:
        return "not run"
    return (f"{row['dataset']} {row['train_n']}/{row['test_n']}, lr {float(row['lr']):g}, "
            f"{row['ranks']} x {row['threads']}, global batch {row['batch']}, "
            f"{float(row['total_seconds']):.2f} s total")


class Runs:
    """the accuracy runs of the four configurations and their curves"""

    def __init__(self, acc_rows):
        b = REPORT_BATCH
        self.serial = latest(acc_rows, 1, 1, b)
        self.global2 = latest(acc_rows, 2, 2, b)
        self.per2 = latest(acc_rows, 2, 1, 2 * b)
        self.per4 = latest(acc_rows, REPORT_RANKS, 1, REPORT_RANKS * b)
        self.c_serial, self.c_global, self.c_per2, self.c_per4 = (
            curves(r) if r else None for r in (self.serial, self.global2, self.per2, self.per4))
        self.epochs = max([len(c) for c in (self.c_serial, self.c_global, self.c_per2, self.c_per4) if c]
                          + [REPORT_EPOCHS])


def report_pair(table, e, sep=" | "):
    return f"{table[e][0]:.4f}{sep}{table[e][1]:.2f}" if e < len(table) else None


def table3(u):
    """the distributed run, per epoch"""
    t3 = [f"# Seed report 003, Table 3 — training metrics over {REPORT_EPOCHS} epochs (distributed CNN)", "",
          "Each cell: loss = mean training cross-entropy of the epoch | accuracy = test accuracy after it (%).", "",
          f"| epoch | report ({REPORT_RANKS} ranks x {REPORT_BATCH} per rank) | ours, report's semantics "
          f"({REPORT_RANKS} ranks x {REPORT_BATCH} per rank) | ours, global batch (2 ranks x 2 threads, batch "
          f"{REPORT_BATCH}) |",
          "|---|---|---|---|"]
    for e in range(u.epochs):
        rep = report_pair(REPORT_DISTRIBUTED, e, " \\| ") or ""
        ours = [fmt_pair(c, e).replace(" | ", " \\| ") for c in (u.c_per4, u.c_global)]
        t3.append(f"| {e + 1} | {rep} | " + " | ".join(ours) + " |")
    t3 += ["", f"Report: MNIST {SEED003['train'] // 1000}k/10k, {REPORT_RANKS} ranks, batch {REPORT_BATCH} per rank, "
               f"lr {SEED003['lr']}; total training time {REPORT_DISTRIBUTED_SECONDS:.2f} s (Apple M4).",
           f"Ours, report's semantics: {describe(u.per4)}.",
           f"Ours, global batch: {describe(u.global2)}.",
           "Our data set is the 8,000 real MNIST digits of data/mnist (test: 2,000), not the "
           f"{SEED003['train']:,} of the report: an epoch is 250 steps at batch {REPORT_BATCH} instead of "
           f"{SEED003['train'] // REPORT_BATCH:,}, so the accuracies after {REPORT_EPOCHS} epochs are "
           "lower than the report's at the same hyperparameters. Compare the columns with each other, and "
           "Table 5 for the serial runs."]
    return t3


def table5(u):
    """serial vs distributed convergence, both semantics"""
    b, p = REPORT_BATCH, REPORT_RANKS
    t5 = ["# Seed report 003, Table 5 — convergence, serial vs distributed, both semantics", "",
          "Each cell: training loss | test accuracy (%) after the epoch.", "",
          f"| epoch | report serial | report distributed ({p} x {b}/rank) | ours serial (1 x 1, batch {b}) "
          f"| ours global batch {b} (2 x 2) | ours 2 ranks x {b}/rank (global {2 * b}) | ours {p} ranks x {b}/rank "
          f"(global {p * b}) |",
          "|---|---|---|---|---|---|---|"]
    for e in range(u.epochs):
        rs = report_pair(REPORT_SERIAL, e, " \\| ") or ""
        rd = report_pair(REPORT_DISTRIBUTED, e, " \\| ") or ""
        cells = [fmt_pair(c, e).replace(" | ", " \\| ") for c in (u.c_serial, u.c_global, u.c_per2, u.c_per4)]
        t5.append(f"| {e + 1} | {rs} | {rd} | " + " | ".join(cells) + " |")
    t5 += [""] + table5_notes(u)
    t5 += ["", f"Serial: {describe(u.serial)}.", f"Global batch: {describe(u.global2)}.",
           f"2 ranks x {b}/rank: {describe(u.per2)}.", f"{p} ranks x {b}/rank: {describe(u.per4)}."]
    return t5


def table5_notes(u):
    out = []
    if u.c_serial and u.c_global:
        dacc = max(abs(x[1] - y[1]) for x, y in zip(u.c_serial, u.c_global))
        dloss = max(abs(x[0] - y[0]) / x[0] for x, y in zip(u.c_serial, u.c_global))
        out.append(f"Global batch (ours): distributed - serial, largest over the epochs: {dacc:.2f} pp test "
                   f"accuracy, {dloss:.1e} relative loss. Every rank takes its part of the same {REPORT_BATCH}-sample "
                   f"batch and the summed gradient is divided by {REPORT_BATCH}, so 2 x 2 takes serial's SGD steps; "
                   "only float rounding of the split sums differs.")
    if u.c_serial and u.c_per4:
        rep_d, rep_s = REPORT_DISTRIBUTED[-1][1], REPORT_SERIAL[-1][1]
        out.append(f"Per-rank batch (ours, the report's semantics): after {len(u.c_per4)} epochs "
                   f"{u.c_per4[-1][1]:.2f}% vs serial {u.c_serial[-1][1]:.2f}% "
                   f"({u.c_per4[-1][1] - u.c_serial[-1][1]:+.2f} pp); the report: {rep_d:.2f}% vs {rep_s:.2f}% "
                   f"({rep_d - rep_s:.2f} pp). "
                   f"With {REPORT_BATCH} samples per rank, P ranks make one SGD step per {REPORT_BATCH} P samples: "
                   f"{REPORT_RANKS} ranks take {REPORT_RANKS}x "
                   "fewer steps per epoch at the same learning rate, so after the same number of epochs "
                   "the model is less trained — the report's accuracy loss is this, not a property of "
                   "distribution. Its 'less updates' explanation is right in substance; global-batch data "
                   "parallelism removes the loss entirely.")
    return out


def timing_medians(time_rows):
    """(P, T) -> (total s, epoch s, runs ("3", "3 (1 disturbed)"), policies, first row,
    the runs' total s, the runs' epoch s); the seconds are the central values of the runs
    by the report's rule (reporting/common.py: the median, MLPerf's trimmed mean from 5 runs)"""
    groups = {}
    for r in time_rows:
        groups.setdefault((int(r["ranks"]), int(r["threads"])), []).append(r)
    out = {}
    for k, v in groups.items():
        tot, ep = [float(r["total_seconds"]) for r in v], [float(r["epoch_seconds_median"]) for r in v]
        out[k] = (center(tot), center(ep), partrain.runs_md(v),
                  ",".join(sorted({r["omp_wait_policy"] or "unset" for r in v})), v[0], tot, ep)
    return out


CONFIGS = {(1, 1): "ours: serial baseline (1 rank, 1 thread)"}


def config_name(k):
    """the execution mode of P x T = K"""
    return CONFIGS.get(k) or ("ours: OpenMP threads" if k[0] == 1 else "ours: MPI ranks" if k[1] == 1
                              else "ours: hybrid MPI + OpenMP")


def table4(med, cores, time_rows=()):
    """serial vs distributed time, 5 epochs of 60k images (TIME_ROWS: for the count of
    disturbed runs, rows scripts/lib.sh marked)"""
    base = med.get((1, 1))
    ep, n = REPORT_EPOCHS, SEED003["train"]
    t4 = [f"# Seed report 003, Table 4 — serial vs distributed training time, {ep} epochs of {n:,} images", "",
          "| execution mode | ranks x threads | cores used | OMP_WAIT_POLICY | total time (s) | speedup | "
          "epoch (s) | runs |",
          "|---|---|---|---|---|---|---|---|",
          f"| report: serial baseline (Apple M4, MNIST) | 1 | 1 | | {REPORT_SERIAL_SECONDS:.2f} | 1.00x | "
          f"{REPORT_SERIAL_SECONDS / ep:.2f} | |",
          f"| report: distributed MPI+OpenMP | {REPORT_RANKS} ranks | {REPORT_RANKS} | | "
          f"{REPORT_DISTRIBUTED_SECONDS:.2f} | {REPORT_SERIAL_SECONDS / REPORT_DISTRIBUTED_SECONDS:.2f}x | "
          f"{REPORT_DISTRIBUTED_SECONDS / ep:.2f} | |"]
    for k in sorted(set(med) | {(1, 1)}):
        if k not in med:
            t4.append(f"| {config_name(k)} | {k[0]} x {k[1]} | | | not run | | | |")
            continue
        tot, e, runs, pol, _, tots, eps = med[k]
        sp = f"{base[0] / tot:.2f}x" if base else ""
        t4.append(f"| {config_name(k)} | {k[0]} x {k[1]} | {min(k[0] * k[1], cores)} | {pol} | "
                  f"{spread(tots, lambda v: f'{v:.2f}')} | {sp} | {spread(eps, lambda v: f'{v:.3f}')} | {runs} |")
    if base:
        r = base[4]
        t4 += ["", f"Ours: cnn/cnn on this machine ({cores} cores), {r['dataset']} {r['train_n']} training / "
                   f"{r['test_n']} test images (the report's {n // 1000}k x 28x28 workload; MNIST {n // 1000}k is not "
                   f"available offline, and the arithmetic does not depend on the pixels), {r['epochs']} epochs, "
                   f"batch {REPORT_BATCH} (global), lr {float(r['lr']):g}; total time = the training loop with the "
                   "per-epoch test evaluation, over the runs: the median (min-max), from 5 runs the mean without the "
                   "fastest and slowest (their range). Speedup over our 1 x 1.",
               f"Report vs ours, serial: {REPORT_SERIAL_SECONDS:.2f} s vs {base[0]:.2f} s "
               f"({REPORT_SERIAL_SECONDS / base[0]:.0f}x less time; different machines: an Apple M4 against "
               "one ~2.1 GHz Xeon core here)."]
    if partrain.n_disturbed(time_rows):
        t4 += ["", f"{partrain.n_disturbed(time_rows)} of the {len(time_rows)} runs were disturbed: other processes' "
                   "load above --max-other cores during them (CSV column disturbed); the runs column counts them."]
    return t4


def speedup_dat(med, cores):
    """the figure's data: speedup vs cores used, one block per series"""
    base = med.get((1, 1))
    blocks = []

    def block(points, label):
        lines = [f"# {label}: cores speedup seconds"]
        lines += [f"{c} {s:.4f} {t:.3f}" for c, s, t in points]
        blocks.append("\n".join(lines))
    if base:
        def pt(k):
            return min(k[0] * k[1], cores), base[0] / med[k][0], med[k][0]
        block([(1, 1.0, base[0])] + [pt(k) for k in sorted(med) if k[0] == 1 and k[1] > 1], "1 rank x T threads")
        block([(1, 1.0, base[0])] + [pt(k) for k in sorted(med) if k[1] == 1 and k[0] > 1], "P ranks x 1 thread")
        block([pt(k) for k in sorted(med) if k[0] > 1 and k[1] > 1] or [(float("nan"), float("nan"), 0)],
              "P ranks x T threads")
    else:
        for label in ("threads", "ranks", "hybrid"):
            block([(float("nan"), float("nan"), 0)], label)
    block([(1, 1.0, REPORT_SERIAL_SECONDS), (REPORT_RANKS, REPORT_SERIAL_SECONDS / REPORT_DISTRIBUTED_SECONDS,
                                              REPORT_DISTRIBUTED_SECONDS)], "seed report 003")
    return "\n\n\n".join(blocks) + "\n"


def tables(acc_rows, time_rows, cores):
    """{file name: its lines} of the three tables, and the figure's .dat text"""
    u, med = Runs(acc_rows), timing_medians(time_rows)
    return ({"cnn-table3.md": table3(u), "cnn-table4.md": table4(med, cores, time_rows), "cnn-table5.md": table5(u)},
            speedup_dat(med, cores))


def main():
    ap = argparse.ArgumentParser(prog=PROG, description="seed report 003's tables with cnn/cnn's numbers")
    ap.add_argument("--accuracy", required=True, metavar="CSV")
    ap.add_argument("--timing", required=True, metavar="CSV")
    ap.add_argument("--outdir", required=True, metavar="DIR")
    ap.add_argument("--dat", metavar="FILE")
    ap.add_argument("--cores", type=int, default=0,
                    help="the cores the run assumed (default: DIR/machine.json beside the timing CSV, else nproc)")
    a = ap.parse_args()
    cores = a.cores or partrain.sweep_machine(os.path.dirname(a.timing) or ".")["cores"]
    acc_rows, time_rows = read(a.accuracy), read(a.timing)
    if not acc_rows and not time_rows:
        die(f"no cnn rows in {a.accuracy} or {a.timing}", 1)
    os.makedirs(a.outdir, exist_ok=True)
    mds, dat_text = tables(acc_rows, time_rows, cores)
    for name, lines in mds.items():
        with open(os.path.join(a.outdir, name), "w") as f:
            f.write("\n".join(lines) + "\n")
    dat = a.dat or os.path.join(a.outdir, "cnn-speedup.dat")
    with open(dat, "w") as f:
        f.write(dat_text)
    print(f"{PROG}: {a.outdir}/cnn-table3.md, cnn-table4.md, cnn-table5.md, {dat}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
