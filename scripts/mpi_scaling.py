#!/usr/bin/env python3
"""
scripts/mpi_scaling.py — plot data for the MPI scaling figures (scripts/plot.sh).

  mpi_scaling.py STRONG_CSV WEAK_CSV --outdir DIR

Reads the sweeps of bench/mpi-sweep.sh strictly by column name (scripts/partrain.py)
and writes, per --sync variant (in mpi/mpi's own order: its --list-variants),
whitespace-column files that plots/mpi-scaling.gp and plots/mpi-comm.gp draw:
  DIR/mpi-strong-VARIANT.dat  P epoch_s speedup comm_s comm_pct
      speedup = serial's epoch time / this one (serial/serial's row in the same CSV)
  DIR/mpi-weak-VARIANT.dat    P epoch_s efficiency comm_s comm_pct train_n
      efficiency = epoch time at P = 1 / epoch time at P (1 = perfect weak scaling)
  DIR/mpi-strong-index.dat, DIR/mpi-weak-index.dat   "FILE<TAB>VARIANT" per line
Strong: the configuration (dataset, train_n, batch, hidden, epochs) of the CSV's
latest row; weak: the per-rank configuration (train_n/ranks, batch/ranks) of the
latest row; within it the latest row per (variant, ranks). A missing or empty CSV
gives no files for that sweep. Prints shell assignments for plot.sh:
  strong_n=N weak_n=N serial=SECONDS strong_title='...' weak_title='...'
(a title ends "(K of N runs disturbed)" when scripts/lib.sh marked any of the plotted rows
disturbed: other load above --max-other during them).
Exit status: 0; 2 on a usage or file error. Python 3 standard library only.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import partrain  # noqa: E402

PROG = "mpi_scaling.py"


def rows_of(path):
    if not path or not os.path.exists(path) or os.path.getsize(path) == 0:
        return []
    try:
        rows = partrain.read_csv(path)
    except partrain.CSVError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        sys.exit(2)
    for i, r in enumerate(rows):
        r["_order"] = i
    return rows


def latest_of(rows):
    return max(rows, key=lambda r: (r["timestamp"], r["_order"]))


def pick(rows, same):
    """latest row per (program, variant, ranks) among rows with same(row) true"""
    out = {}
    for r in rows:
        if not same(r):
            continue
        k = (r["program"], r["variant"], int(r["ranks"]))
        if k not in out or (r["timestamp"], r["_order"]) >= (out[k]["timestamp"], out[k]["_order"]):
            out[k] = r
    return out


def write_variants(chosen, outdir, prefix, columns, line):
    variants = partrain.ordered_variants("mpi", {k[1] for k in chosen if k[0] == "mpi"}, PROG)
    index = []
    for v in variants:
        path = os.path.join(outdir, f"{prefix}-{v}.dat")
        pts = sorted((k[2], r) for k, r in chosen.items() if k[0] == "mpi" and k[1] == v)
        with open(path, "w") as f:
            f.write(f"# {prefix} {v}\n# {columns}\n")
            for p, r in pts:
                f.write(line(p, r, pts) + "\n")
        index.append(f"{path}\t{v}")
    with open(os.path.join(outdir, f"{prefix}-index.dat"), "w") as f:
        f.write("".join(x + "\n" for x in index))
    return len(index)


def main(argv):
    ap = argparse.ArgumentParser(prog=PROG)
    ap.add_argument("strong")
    ap.add_argument("weak")
    ap.add_argument("--outdir", required=True)
    a = ap.parse_args(argv)
    os.makedirs(a.outdir, exist_ok=True)
    for old in os.listdir(a.outdir):
        if old.startswith(("mpi-strong-", "mpi-weak-")) and old.endswith(".dat"):
            os.remove(os.path.join(a.outdir, old))
    n_strong = n_weak = 0
    serial = "NaN"
    strong_title = weak_title = ""

    rows = rows_of(a.strong)
    if rows:
        last = latest_of(rows)
        cfg = ("dataset", "train_n", "batch", "hidden", "epochs")
        chosen = pick(rows, lambda r: all(r[c] == last[c] for c in cfg))
        ser = [r for k, r in chosen.items() if k[0] == "serial"]
        t_ser = float(ser[0]["epoch_seconds_median"]) if ser else float("nan")
        serial = f"{t_ser:.6g}"

        def strong_line(p, r, _):
            t, c = float(r["epoch_seconds_median"]), float(r["comm_seconds"])
            return f"{p} {t:.6g} {t_ser / t:.6g} {c:.6g} {100 * c / t:.4g}"
        n_strong = write_variants(chosen, a.outdir, "mpi-strong", "P epoch_s speedup_vs_serial comm_s comm_pct",
                                  strong_line)
        strong_title = (f"{last['dataset']} {last['train_n']} samples, global batch {last['batch']}, {last['hidden']}"
                        f"{partrain.disturbed_count(list(chosen.values()))}")

    rows = rows_of(a.weak)
    if rows:
        last = latest_of(rows)
        per = lambda r: (int(r["train_n"]) // int(r["ranks"]), int(r["batch"]) // int(r["ranks"]),
                         r["dataset"], r["hidden"], r["epochs"])
        chosen = pick(rows, lambda r: per(r) == per(last))

        def weak_line(p, r, pts):
            t, c = float(r["epoch_seconds_median"]), float(r["comm_seconds"])
            t1 = next((float(x["epoch_seconds_median"]) for q, x in pts if q == 1), float("nan"))
            return f"{p} {t:.6g} {t1 / t:.6g} {c:.6g} {100 * c / t:.4g} {r['train_n']}"
        n_weak = write_variants(chosen, a.outdir, "mpi-weak", "P epoch_s efficiency comm_s comm_pct train_n", weak_line)
        n0, b0 = per(last)[0], per(last)[1]
        weak_title = (f"{last['dataset']} {n0} samples and {b0} rows per step per rank, {last['hidden']}"
                      f"{partrain.disturbed_count(list(chosen.values()))}")
    print(f"strong_n={n_strong} weak_n={n_weak} serial={serial} strong_title='{strong_title}' weak_title='{weak_title}'")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
