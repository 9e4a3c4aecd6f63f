#!/usr/bin/env python3
"""
scripts/openmp_sweep.py — plot data for plots/openmp.gp from the thread sweep CSV.

  openmp_sweep.py CSV --outdir DIR

Reads the rows that bench/openmp-bench.sh appended (run_all.sh's openmp sweep:
results/openmp.csv) strictly by column name (scripts/partrain.py). The modes come in
openmp/openmp's own order (its --list-variants). For the mini-batch size with the most
openmp rows, per --accum mode and thread count T: the median over runs of
epoch_seconds_median and of sync_seconds, and the speedup over serial/serial's median
epoch time at the same batch size. Writes DIR/openmp-MODE.dat (whitespace columns
"threads epoch_s speedup sync_s policy") and DIR/openmp-index.dat ("FILE<TAB>MODE" per
line), and prints shell assignments for scripts/plot.sh:
  openmp_n=3 serial=0.571 cores=2 openmp_title='...'
(the title ends "(K of N runs disturbed)" when scripts/lib.sh marked any of the plotted
runs disturbed: other load above --max-other during them; rows without that column count
as not disturbed).
Exit status: 0; 1 when the CSV holds no openmp rows; 2 on a usage or file error.
Python 3 standard library only.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import partrain  # noqa: E402

PROG = "openmp_sweep.py"


def main(argv):
    p = argparse.ArgumentParser(prog=PROG, description="plot data for plots/openmp.gp")
    p.add_argument("csv")
    p.add_argument("--outdir", required=True)
    a = p.parse_args(argv)
    need = ("program", "variant", "threads", "batch", "epoch_seconds_median", "sync_seconds",
            "omp_wait_policy", "train_n", "dataset")
    try:
        rows = partrain.read_csv(a.csv, need)
    except partrain.CSVError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    omp = [r for r in rows if r["program"] == "openmp"]
    if not omp:
        print(f"{PROG}: {a.csv}: no openmp rows", file=sys.stderr)
        return 1
    batches = [r["batch"] for r in omp]
    batch = max(set(batches), key=batches.count)
    omp = [r for r in omp if r["batch"] == batch]
    serial = [float(r["epoch_seconds_median"]) for r in rows if r["program"] == "serial" and r["batch"] == batch]
    s_med = statistics.median(serial) if serial else float("nan")

    os.makedirs(a.outdir, exist_ok=True)
    index = []
    for mode in partrain.ordered_variants("openmp", {r["variant"] for r in omp}, PROG):
        by_t = {}
        for r in omp:
            if r["variant"] == mode:
                by_t.setdefault(int(r["threads"]), []).append(r)
        if not by_t:
            continue
        path = os.path.join(a.outdir, f"openmp-{mode}.dat")
        with open(path, "w") as f:
            f.write(f"# openmp --accum {mode}, batch {batch} ({a.csv}); medians over runs\n"
                    "# threads epoch_s speedup_vs_serial sync_s omp_wait_policy\n")
            for t in sorted(by_t):
                rs = by_t[t]
                e = statistics.median(float(r["epoch_seconds_median"]) for r in rs)
                s = statistics.median(float(r["sync_seconds"]) for r in rs)
                f.write(f"{t} {e:.6g} {s_med / e:.6g} {s:.6g} {rs[-1]['omp_wait_policy'] or 'unset'}\n")
        index.append(f"{path}\t{mode}")
    with open(os.path.join(a.outdir, "openmp-index.dat"), "w") as f:
        f.write("".join(line + "\n" for line in index))
    r0 = omp[0]
    plotted = omp + [r for r in rows if r["program"] == "serial" and r["batch"] == batch]
    title = f"{r0['dataset']}, {r0['train_n']} samples, batch {batch}{partrain.disturbed_count(plotted)}"
    print(f"openmp_n={len(index)} serial={s_med:.6g}" if serial else f"openmp_n={len(index)} serial=NaN", end="")
    print(f" cores={partrain.sweep_machine(os.path.dirname(a.csv) or '.')['cores']} openmp_title='{title}'")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
