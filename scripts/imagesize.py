#!/usr/bin/env python3
"""
scripts/imagesize.py — seed report 002's "duration vs image size" with our trainers:
plot data for plots/imagesize.gp and a console table, from run_all.sh's image-size sweep.

  imagesize.py CSV --outdir DIR      write the plot data, print shell assignments
  imagesize.py CSV --table           print the table only

The sweep (run_all.sh, step imagesize) trains the same MLP on the same number of samples
with the images resampled to S x S (--image-size S: 28, 57, 112, i.e. 784, 3249 and 12544
inputs) with serial/serial on one pinned core, openmp/openmp with C threads and mpi/mpi
with C ranks (allreduce; C: the cores run_all.sh assumed, docs/sweeps.md). Reads the CSV strictly by column name (scripts/partrain.py;
schema: common/results.h).
The configuration plotted is that of the CSV's latest row (dataset, train_n, batch,
hidden, epochs); per (program, variant, ranks, threads, image size) the median over its
rows of epoch_seconds_median. speedup = serial's epoch time at the same image size / this.

Writes DIR/imagesize-NN.dat (whitespace columns "inputs side epoch_s speedup gflops", one
file per program configuration) and DIR/imagesize-index.dat ("FILE<TAB>TITLE" per line),
and prints for scripts/plot.sh:
  imagesize_n=3 imagesize_title='...'
Exit status: 0; 1 when the CSV holds no usable rows; 2 on a usage or file error.
Python 3 standard library only.
"""
import argparse
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import partrain  # noqa: E402

PROG = "imagesize.py"
ORDER = {"serial": 0, "openmp": 1, "mpi": 2}


def die(msg, code=2):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(code)


def label(prog, variant, ranks, threads):
    if prog == "serial":
        return "serial/serial (1 core)"
    flags = partrain.variant_flags(prog, variant) or variant   # e.g. --accum loop (the bare name if not built)
    if prog == "openmp":
        return f"openmp/openmp {flags}, T = {threads}"
    if prog == "mpi":
        return f"mpi/mpi {flags}, P = {ranks}"
    return f"{prog} {variant}, {ranks} x {threads}"


def main(argv):
    p = argparse.ArgumentParser(prog=PROG, description="plot data for plots/imagesize.gp")
    p.add_argument("csv")
    p.add_argument("--outdir")
    p.add_argument("--table", action="store_true")
    a = p.parse_args(argv)
    if not a.outdir and not a.table:
        die("give --outdir DIR or --table")
    try:
        rows = partrain.read_csv(a.csv)
    except partrain.CSVError as e:
        die(str(e))
    need = ("program", "variant", "ranks", "threads", "image_size", "dataset", "train_n", "batch",
            "hidden", "epochs", "epoch_seconds_median", "gflops", "omp_wait_policy", "timestamp")
    if rows and any(c not in rows[0] for c in need):
        die(f"{a.csv}: not a partrain result CSV (columns {', '.join(need)} needed)")
    if not rows:
        die(f"{a.csv}: no rows", 1)
    conf_keys = ("dataset", "train_n", "batch", "hidden", "epochs")
    latest = partrain.newest(rows)
    conf = {k: latest[k] for k in conf_keys}
    rows = [r for r in rows if all(r[k] == conf[k] for k in conf_keys)]

    groups = {}
    for r in rows:
        key = (r["program"], r["variant"], int(r["ranks"]), int(r["threads"]))
        groups.setdefault(key, {}).setdefault(int(r["image_size"]), []).append(r)
    serial = next((v for k, v in groups.items() if k[0] == "serial"), {})
    ser_t = {s: statistics.median(float(r["epoch_seconds_median"]) for r in rs) for s, rs in serial.items()}
    keys = sorted(groups, key=lambda k: (ORDER.get(k[0], 9), k))
    series = []
    for k in keys:
        pts = []
        for side in sorted(groups[k]):
            rs = groups[k][side]
            t = statistics.median(float(r["epoch_seconds_median"]) for r in rs)
            g = statistics.median(float(r["gflops"]) for r in rs)
            sp = ser_t[side] / t if side in ser_t and t > 0 else float("nan")
            pol = ",".join(sorted({r["omp_wait_policy"] or "unset" for r in rs}))
            pts.append((side * side, side, t, sp, g, pol))
        series.append((k, pts))

    e = int(conf["epochs"])
    timed = {1: "1 epoch, timed", 2: "2 epochs, the 2nd timed"}.get(e, f"{e} epochs, median of epochs 2..{e}")
    title = (f"{conf['dataset']}, {conf['train_n']} training samples, batch {conf['batch']}, "
             f"hidden {conf['hidden']}, {timed}")
    if a.table:
        print(f"epoch time vs input size: {title}")
        print(f"{'program':<42} {'inputs':>7} {'epoch s':>9} {'GFLOP/s':>8} {'vs serial':>9}  OMP_WAIT_POLICY")
        for k, pts in series:
            for inputs, side, t, sp, g, pol in pts:
                print(f"{label(*k):<42} {inputs:>7} {t:9.4f} {g:8.1f} {sp:8.2f}x  {pol}")
        return 0

    os.makedirs(a.outdir, exist_ok=True)
    for old in glob.glob(os.path.join(a.outdir, "imagesize-[0-9]*.dat")):
        os.remove(old)
    index = []
    for i, (k, pts) in enumerate(series, 1):
        path = os.path.join(a.outdir, f"imagesize-{i:02d}.dat")
        with open(path, "w") as f:
            f.write(f"# {label(*k)}: inputs side epoch_s speedup_vs_serial gflops\n")
            for inputs, side, t, sp, g, _ in pts:
                f.write(f"{inputs} {side} {t:.6f} {sp:.4f} {g:.2f}\n")
        index.append(f"{path}\t{label(*k)}")
    with open(os.path.join(a.outdir, "imagesize-index.dat"), "w") as f:
        f.write("\n".join(index) + "\n")
    print(f"imagesize_n={len(series)} imagesize_title='{title}'")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
