"""
scripts/tta_sweep.py — the time-to-accuracy sweep's arithmetic (bench/tta-sweep.sh,
scripts/reporting/tta.py, plots/tta.gp; docs/tta.md), in one place so the sweep, the
figure and the report agree:

  best      which data-parallel strategy is fastest at C workers in a run's
            bench-openmp.csv, bench-mpi.csv, bench-hybrid.csv (speedup over serial's
            epoch at the same batch in the same file, by column name), else mpi allreduce
            at P = C; one tab-separated line: program, variant, ranks, threads, why
  summary   tta.csv (and tta-diverged.txt: runs whose loss diverged, no row) -> per (batch, side) the medians with min and max over seeds
  stops     the batch at which seconds-to-target stops falling (defined at stops_falling)
  table     tta.csv -> the sweep's closing table
  dat       tta.csv -> the figure's data file (plots/tta.gp); exit 1: no rows

  python3 scripts/tta_sweep.py best --results DIR --cores C
  python3 scripts/tta_sweep.py table TTA.CSV [DIVERGED.TXT]
  python3 scripts/tta_sweep.py dat TTA.CSV OUT.DAT [DIVERGED.TXT]
Python 3 standard library only.
"""

import math
import os
import sys

import partrain as P

STRATEGY_CSVS = ("bench-openmp.csv", "bench-mpi.csv", "bench-hybrid.csv")
DATA_PARALLEL = ("openmp", "mpi", "hybrid")   # same maths as serial at the same global batch
WITHIN = 0.10   # "stopped falling": median seconds within 10 % of the sweep's minimum


def best(results, cores):
    """(program, variant, ranks, threads, why) of the fastest data-parallel strategy at
    CORES workers in RESULTS' bench CSVs: per configuration the geometric mean over the
    batches of serial's median epoch / its median epoch (same file, same batch)"""
    scores = {}
    for name in STRATEGY_CSVS:
        path = os.path.join(results, name)
        if not os.path.isfile(path):
            continue
        try:
            rows = P.read_csv(path, need=("program", "variant", "ranks", "threads", "batch", "epoch_seconds_median"))
        except P.CSVError as e:
            print(f"tta_sweep: {e} (left out of the choice)", file=sys.stderr)
            continue
        serial = {}
        for r in rows:
            if r["program"] == "serial":
                serial.setdefault(r["batch"], []).append(P.num(r["epoch_seconds_median"]))
        configs = {}
        for r in rows:
            if r["program"] not in DATA_PARALLEL:
                continue
            try:
                workers = int(r["ranks"]) * int(r["threads"])
            except ValueError:
                continue
            if workers != cores or r["batch"] not in serial:
                continue
            key = (r["program"], r["variant"], int(r["ranks"]), int(r["threads"]))
            configs.setdefault(key, {}).setdefault(r["batch"], []).append(P.num(r["epoch_seconds_median"]))
        for key, by_batch in configs.items():
            ratios = []
            for b, vals in by_batch.items():
                s, t = P.median(serial[b]), P.median(vals)
                if s and t:
                    ratios.append(s / t)
            if ratios:
                g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
                scores[key] = (g, name, sorted(by_batch, key=int))
    if not scores:
        return ("mpi", "allreduce", cores, 1,
                f"no {', '.join(STRATEGY_CSVS)} rows at {cores} workers in this run's results: mpi allreduce at P = C, "
                "the default")
    key = max(scores, key=lambda k: scores[k][0])
    g, name, batches = scores[key]
    return key + (f"fastest per epoch at {cores} workers in {name}: {g:.2f}x serial "
                  f"(geometric mean over batch {', '.join(batches)}; {len(scores)} configurations compared)",)


def label(program, variant, ranks, threads):
    """'mpi allreduce P=2', 'openmp reduction T=2', 'hybrid allreduce 2x1'"""
    if program == "openmp":
        return f"openmp {variant} T={threads}"
    if program == "mpi":
        return f"mpi {variant} P={ranks}"
    return f"{program} {variant} {ranks}x{threads}"


def peak_lr(row):
    """the rate after the warm-up: --lr x batch / B0 under linear scaling (lr_schedule
    'linear-bB0[-wW]'), else --lr"""
    lr, sched = P.num(row["lr"]), row.get("lr_schedule", "")
    if lr is not None and sched.startswith("linear-b"):
        b0 = P.num(sched[len("linear-b"):].split("-")[0])
        if b0:
            return lr * int(row["batch"]) / b0
    return lr


def table(rows, diverged=()):
    """the sweep's closing table (bench/tta-sweep.sh), one line per batch"""
    s = summary(rows, diverged)
    lines = ["batch  lr      serial: epochs, s to target (median; reached)   best: epochs, s to target"]
    for b in sorted(s):
        cells = []
        for name in ("serial", "best"):
            x = s[b].get(name)
            if not x:
                cells.append("-")
            elif x["reached"]:
                cells.append(f"{x['epochs'][0]:g} ep, {x['seconds'][0]:.1f} s ({x['reached']}/{x['runs']})")
            else:
                cells.append(f"not reached in {x['cap']} ep (0/{x['runs']}"
                             + (f"; {len(x['diverged'])} diverged)" if x["diverged"] else ")"))
        lr = next(iter(s[b].values()))["lr"]
        lines.append(f"{b:<6} {lr:<7.4g} {cells[0]:<44} {cells[1]}")
    return "\n".join(lines)


def read_rows(path):
    """the sweep's rows (tta.csv); [] when it is missing (every run diverged)"""
    if not os.path.isfile(path):
        return []
    return P.read_csv(path, need=("program", "variant", "ranks", "threads", "batch", "lr", "seed", "epochs",
                                  "target_accuracy", "epochs_to_target", "seconds_to_target",
                                  "epoch_seconds_median"))


def side(row):
    return "serial" if row["program"] == "serial" else "best"


def spread(values):
    """(median, min, max) of the numbers, or None when there are none"""
    vals = sorted(v for v in values if v is not None)
    return (P.median(vals), vals[0], vals[-1]) if vals else None


def read_diverged(path):
    """the runs whose loss diverged (bench/tta-sweep.sh --diverged FILE: a header, then
    side, label, batch, seed, lr, cap, epoch tab-separated); [] when the file is missing"""
    if not path or not os.path.isfile(path):
        return []
    out = []
    with open(path) as f:
        lines = f.read().splitlines()
    for n, line in enumerate(lines[1:], 2):
        cells = line.split("\t")
        if len(cells) != 7 or cells[0] not in ("serial", "best"):
            raise ValueError(f"{path}: line {n}: not 'side<TAB>label<TAB>batch<TAB>seed<TAB>lr<TAB>cap<TAB>epoch'")
        out.append(dict(zip(("side", "label", "batch", "seed", "lr", "cap", "epoch"), cells)))
    return out


def summary(rows, diverged=()):
    """{batch: {side: {...}}}: per batch and side (serial, best) the rows, the runs (rows
    and diverged runs), the reached count, median/min/max of epochs and seconds to target
    over the seeds that reached it, the median epoch time, the cap (epochs run), the peak
    lr, the strategy's label and the diverged runs' epochs"""
    out = {}
    for r in rows:
        b = int(r["batch"])
        s = out.setdefault(b, {}).setdefault(side(r), {"rows": [], "diverged": []})
        s["rows"].append(r)
    for d in diverged:
        s = out.setdefault(int(d["batch"]), {}).setdefault(d["side"], {"rows": [], "diverged": []})
        s["diverged"].append(d)
    for b, sides in out.items():
        for name, s in sides.items():
            rs, dv = s["rows"], s["diverged"]
            reached = [r for r in rs if P.num(r["epochs_to_target"]) is not None]
            s["runs"], s["reached"] = len(rs) + len(dv), len(reached)
            s["epochs"] = spread(P.num(r["epochs_to_target"]) for r in reached)
            s["seconds"] = spread(P.num(r["seconds_to_target"]) for r in reached)
            s["epoch_s"] = P.median(P.num(r["epoch_seconds_median"]) for r in rs)
            s["cap"] = max([int(r["epochs"]) for r in rs] + [int(d["cap"]) for d in dv])
            s["lr"] = peak_lr(rs[0]) if rs else P.num(dv[0]["lr"])
            s["label"] = (label(rs[0]["program"], rs[0]["variant"], rs[0]["ranks"], rs[0]["threads"]) if rs
                          else dv[0]["label"])
    return out


def stops_falling(points):
    """POINTS: [(batch, median seconds to target or None)]. The batch at which
    seconds-to-target stops falling: the smallest batch whose median is within WITHIN
    (10 %) of the minimum over the batches that reached the target. Batches past it either
    gain less than 10 % or cost more. Returns (batch, minimum's batch, minimum) or None
    when no batch reached the target."""
    reached = [(b, s) for b, s in sorted(points) if s is not None]
    if not reached:
        return None
    b_min, s_min = min(reached, key=lambda p: p[1])
    for b, s in reached:
        if s <= s_min * (1 + WITHIN):
            return b, b_min, s_min


def grows(points):
    """POINTS: [(batch, median epochs to target or None)]: 'yes' when the medians of the
    batches that reached the target never fall and the last is above the first, 'no'
    when they never rise, else 'not monotonic'; None with fewer than two"""
    vals = [e for _, e in sorted(points) if e is not None]
    if len(vals) < 2:
        return None
    if all(b >= a for a, b in zip(vals, vals[1:])) and vals[-1] > vals[0]:
        return "yes"
    if all(b <= a for a, b in zip(vals, vals[1:])):
        return "no"
    return "not monotonic"


def same_epochs(rows, diverged=()):
    """(pairs with equal epochs_to_target, pairs): serial against the strategy at each
    (batch, seed) both ran; both not reaching the target (a diverged run did not) counts
    as equal"""
    by = {}
    for r in rows:
        by.setdefault((r["batch"], r["seed"]), {}).setdefault(side(r), r["epochs_to_target"])
    for d in diverged:
        by.setdefault((d["batch"], d["seed"]), {}).setdefault(d["side"], "")
    pairs = [v for v in by.values() if len(v) == 2]
    return sum(v["serial"] == v["best"] for v in pairs), len(pairs)


def dat(rows, out, diverged=()):
    """the figure's data (plots/tta.gp), one line per batch, '?' where there is no number
    (gnuplot's missing value). Per side (serial, then best): epochs to target median min
    max, seconds to target median min max (over the seeds that reached it), and, when no
    seed reached it, the cap and the median run time (the not-reached marker); then the
    per-epoch speedup of best over serial, the reached counts, the runs per side and the
    cap where a side reached it with no seed (the "not reached" label's height).
    Returns the shell words plot.sh evaluates: tta_n, tta_best, tta_target, tta_unreached
    and tta_partial ('SERIAL BEST': batches where that side reached the target with no
    seed, with some seeds)."""
    s = summary(rows, diverged)
    lines = ["# batch  serial: ep med min max, s med min max, cap_ep cap_s  best: the same"
             "  epoch_speedup  serial_reached best_reached runs  unreached_cap"]

    def cols(x):
        if x is None:
            return ["?"] * 8, "0"
        e, t = x["epochs"], x["seconds"]
        cells = [f"{v:g}" for v in e] if e else ["?"] * 3
        cells += [f"{v:.4f}" for v in t] if t else ["?"] * 3
        if x["reached"] == 0:
            total = P.median(P.num(r.get("total_seconds")) for r in x["rows"])   # None: all diverged
            cells += [str(x["cap"]), f"{total:.4f}" if total is not None else "?"]
        else:
            cells += ["?", "?"]
        return cells, str(x["reached"])

    for b in sorted(s):
        ser, bst = s[b].get("serial"), s[b].get("best")
        sp = (f"{ser['epoch_s'] / bst['epoch_s']:.4f}" if ser and bst and ser["epoch_s"] and bst["epoch_s"] else "?")
        (c1, k1), (c2, k2) = cols(ser), cols(bst)
        runs = max((x["runs"] for x in (ser, bst) if x), default=0)
        caps = [x["cap"] for x in (ser, bst) if x and x["reached"] == 0]
        lines.append(" ".join([str(b)] + c1 + c2 + [sp, k1, k2, str(runs), str(max(caps)) if caps else "?"]))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    best_label = next((x["best"]["label"] for x in s.values() if "best" in x), "none")
    target = next((f"{P.num(r['target_accuracy']):g}" for r in rows if P.num(r.get("target_accuracy")) is not None), "?")
    if not lines[1:]:
        return None
    # how many batches have a not-reached or a partly reached side: gnuplot draws a label
    # layer only when it has points (an all-missing labels layer can crash gnuplot 5.4)
    def count(name, test):
        return sum(test(v[name]["reached"], v[name]["runs"]) for v in s.values() if name in v)

    def unreached(k, n):
        return k == 0

    def partial(k, n):
        return 0 < k < n

    return (f"tta_n={len(s)} tta_best='{best_label}' tta_target='{target}' "
            f"tta_unreached='{count('serial', unreached)} {count('best', unreached)}' "
            f"tta_partial='{count('serial', partial)} {count('best', partial)}'")


def main(argv):
    if len(argv) == 5 and argv[0] == "best" and argv[1] == "--results" and argv[3] == "--cores":
        try:
            cores = int(argv[4])
        except ValueError:
            print(f"tta_sweep: --cores: not an integer: '{argv[4]}'", file=sys.stderr)
            return 2
        print("\t".join(str(x) for x in best(argv[2], cores)))
        return 0
    if len(argv) in (2, 3) and argv[0] == "table":
        try:
            print(table(read_rows(argv[1]), read_diverged(argv[2] if len(argv) == 3 else None)))
        except (P.CSVError, ValueError) as e:
            print(f"tta_sweep: {e}", file=sys.stderr)
            return 1
        return 0
    if len(argv) in (3, 4) and argv[0] == "dat":
        try:
            rows = read_rows(argv[1])
            diverged = read_diverged(argv[3] if len(argv) == 4 else None)
            words = dat(rows, argv[2], diverged) if rows or diverged else None
            if words is None:
                return 1
            print(words)
        except (P.CSVError, OSError, ValueError) as e:
            print(f"tta_sweep: {e}", file=sys.stderr)
            return 1
        return 0
    print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
