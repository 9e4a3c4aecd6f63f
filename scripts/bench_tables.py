#!/usr/bin/env python3
"""
scripts/bench_tables.py — the tables the bench/*.sh scripts print after their runs, from
the rows they appended (read by column name through scripts/partrain.py).

  bench_tables.py openmp CSV --since ISO --epochs E --train N [--corun-log FILE --cores C]
                  [--bounds OUT]                                 bench/openmp-bench.sh
  bench_tables.py mpi CSV --since ISO --epochs E --train N [--cores-log FILE --cores C]
                  [--bounds OUT]                                 bench/mpi-bench.sh
  bench_tables.py cnn CSV --since ISO --epochs E --train N --cores-log FILE [--bounds OUT]
                                                                 bench/cnn-bench.sh
  bench_tables.py hybrid CSV [--corun-log FILE --cores C --bounds OUT]   bench/hybrid-bench.sh
  bench_tables.py hybrid-grid CSV --dat FILE [--table MD --data DIR --batch B --epochs E]
                  [--cores N]                    bench/hybrid-grid.sh, scripts/plot.sh
A row counts when its timestamp is >= --since, its epochs column equals --epochs and
(--train N > 0) its train_n equals N. Rows may carry scripts/lib.sh's two extra columns
other_load_cores,disturbed (or not: older CSVs): a runs count marked "*" is a median that
includes disturbed runs, and a line under the table counts them (hybrid-grid: the cell
says "disturbed", the figure's title counts them). --bounds OUT writes the per-round core
bounds the tables print (BOUNDS_HEADER: one row per configuration and round: its same-round
speedup, the bound and the batch) for the report's first page; its first column is
"trainer", not "program", so the report never reads it as result rows. Exit status: 0; 1 when hybrid-grid finds no serial
and hybrid rows; 2 on a usage or file error. Python 3 standard library only.
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import partrain  # noqa: E402
import seeds     # noqa: E402

BOUNDS_HEADER = "trainer,variant,ranks,threads,batch,round,speedup,bound"


def write_bounds(path, rows):
    """the per-round bounds ROWS (tuples in BOUNDS_HEADER's order) to PATH, whole, then renamed"""
    if not path:
        return
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(BOUNDS_HEADER + "\n")
        for r in rows:
            f.write(",".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in r) + "\n")
    os.replace(tmp, path)

PROG = "bench_tables.py"
med = statistics.median


def print_note(rows):
    """the line under a table that says how many of its runs were disturbed (if any)"""
    note = partrain.disturbed_note(rows)
    if note:
        print(note)


def rows_since(path, since, epochs, train):
    return [r for r in partrain.read_csv(path)
            if r["timestamp"] >= since and r["epochs"] == epochs and (train == 0 or r["train_n"] == str(train))]


# ---------------------------------------------------------------- openmp-bench

OPENMP_TARGET = {64: 1.85, 512: 1.85}   # best mode at T = 2 over serial, per batch (checked at T = 2 only; issue 32)
OPENMP_TORCH_TARGET = 2.5              # times faster than PyTorch's best


def openmp_rounds(rs):
    """per batch: the rows grouped by (program, variant, T) with their round, and serial's
    and PyTorch's best epoch per round (every serial row starts a round: rows are appended
    in run order)"""
    rnd, cur = [], -1
    for r in rs:
        if r["program"] == "serial":
            cur += 1
        rnd.append(cur)
    groups, serial_r, torch_r = {}, {}, {}
    for r, k in zip(rs, rnd):
        e = float(r["epoch_seconds_median"])
        key = (r["program"], r["variant"], int(r["threads"]))
        groups.setdefault(key, []).append((k, r))
        if r["program"] == "serial":
            serial_r[k] = e
        if r["program"] == "pytorch":
            torch_r[k] = min(e, torch_r.get(k, e))
    return groups, serial_r, torch_r


def read_corun_log(path):
    """batch -> per round, the epochs of the C serial copies that ran at once (bench_corun in
    scripts/lib.sh), in run order"""
    out = {}
    with open(path) as f:
        for line in f:
            b, *eps = line.split()
            out.setdefault(int(b), []).append([float(e) for e in eps])
    return out


def corun_bounds(b, serial_r, corun, cores, configs, out):
    """the per-round core bound with CORES workers, CORES x serial's epoch alone / the
    slowest of the copies at once in the same round (SERIAL_R, CORUN: by round index), and
    each of CONFIGS' speedups as a fraction of it; CONFIGS: (label, trainer, variant, ranks,
    threads, [(round, epoch)]); the rounds go to OUT as BOUNDS_HEADER tuples"""
    bound = {k: cores * serial_r[k] / max(eps) for k, eps in enumerate(corun)
             if k in serial_r and len(eps) == cores and min(eps) > 0}
    if not bound:
        print(f"core bound at {cores} workers: not measured (no round ran {cores} serial copies at once)")
        return
    print(f"core bound at {cores} workers: {cores} x serial alone / the slowest of {cores} serial copies at "
          f"once, per round: {fmt_rounds([bound[k] for k in sorted(bound)])}, median {med(bound.values()):.2f}x")
    for label, trainer, variant, ranks, threads, runs_ in configs:
        pairs = [(serial_r[k] / e, bound[k]) for k, e in runs_ if k in bound and e > 0]
        if not pairs:
            continue
        out += [(trainer, variant, ranks, threads, b, i, sp, bd) for i, (sp, bd) in enumerate(pairs, 1)]
        print(f"  {label:<15s} {med(sp for sp, _ in pairs):.2f}x serial = "
              f"{med(sp / bd for sp, bd in pairs):.2f} of the bound (rounds: {fmt_rounds([sp / bd for sp, bd in pairs])})")


def openmp_batch(b, rs, corun=None, cores=0, bounds=None):
    groups, serial_r, torch_r = openmp_rounds(rs)
    torch_t = {key[2]: med(float(r["epoch_seconds_median"]) for _, r in v)
               for key, v in groups.items() if key[0] == "pytorch"}
    head = f"batch {b}"
    if torch_t:
        tb = min(torch_t, key=torch_t.get)
        head += f" (PyTorch: best with {tb} thread(s), {torch_t[tb]:.3f} s; " + ", ".join(
            f"T={t}: {torch_t[t]:.3f} s" for t in sorted(torch_t)) + ")"
    print("\n" + head)
    hdr = (f"{'program':8s} {'variant':15s} {'T':>2s} {'runs':>4s} {'epoch s':>8s} {'sync s':>7s} "
           f"{'policy':>8s} {'vs serial':>9s} {'vs torch':>8s}")
    print(hdr)
    print("-" * len(hdr))
    best = None
    tmax = max((k[2] for k in groups if k[0] == "openmp"), default=0)   # the cores (1 and C are run)
    for key in sorted(groups, key=lambda k: (k[0] != "serial", k[0] == "pytorch", k[2], k[1])):
        v = groups[key]
        e = med(float(r["epoch_seconds_median"]) for _, r in v)
        sy = med(float(r["sync_seconds"]) for _, r in v)
        pol = v[-1][1]["omp_wait_policy"] or "unset"
        sp = [serial_r[k] / float(r["epoch_seconds_median"]) for k, r in v if k in serial_r]
        vt = [torch_r[k] / float(r["epoch_seconds_median"]) for k, r in v if k in torch_r]
        sps = f"{med(sp):.2f}x" if sp else "-"
        vts = f"{med(vt):.2f}x" if vt else "-"
        print(f"{key[0]:8s} {key[1][:15]:15s} {key[2]:2d} {partrain.runs_cell([r for _, r in v]):>4s} {e:8.3f} "
              f"{sy:7.3f} {pol:>8s} {sps:>9s} {vts:>8s}")
        if key[0] == "openmp" and key[2] == tmax and sp and (best is None or med(sp) > best[1]):
            best = (key[1], med(sp), med(vt) if vt else None, sp)
    print_note(rs)
    if best:
        tgt = OPENMP_TARGET.get(b) if tmax == 2 else None
        line = (f"best mode at T={tmax}, batch {b}: {best[0]}, {best[1]:.2f}x serial (rounds: "
                + " ".join(f"{x:.2f}" for x in best[3]) + ")")
        if tgt:
            line += f"; target >= {tgt}: {'met' if best[1] >= tgt else 'NOT met'}"
        if best[2] is not None:
            line += (f"; {best[2]:.2f}x faster than PyTorch's best" + (f" (target >= {OPENMP_TORCH_TARGET}: "
                     f"{'met' if best[2] >= OPENMP_TORCH_TARGET else 'NOT met'})" if tmax == 2 else ""))
        print(line)
    if corun is not None:
        corun_bounds(b, serial_r, corun, cores,
                     [(key[1], "openmp", key[1], 1, cores, [(k, float(r["epoch_seconds_median"])) for k, r in groups[key]])
                      for key in sorted(k for k in groups if k[0] == "openmp" and k[2] == cores)], bounds)


def cmd_openmp(a):
    rows = rows_since(a.csv, a.since, a.epochs, a.train)
    print(f"epoch s: median over runs of each run's median epoch time (epochs 2..{a.epochs}); sync s: the same for")
    print("sync_seconds (summed over threads; critical: inside the critical construct incl. waiting to enter,")
    print("others: barrier waits). vs serial / vs torch: median over rounds of the ratio to serial's time and to")
    print("PyTorch's best time measured in the same round (rounds are interleaved, so the machine's drift cancels).")
    corun = read_corun_log(a.corun_log) if a.corun_log else None
    bounds = []
    for b in sorted({int(r["batch"]) for r in rows}):
        openmp_batch(b, [r for r in rows if int(r["batch"]) == b],
                     None if corun is None else corun.get(b, []), a.cores, bounds)
    if corun is not None:
        write_bounds(a.bounds, bounds)
    return 0


# ---------------------------------------------------------------- mpi-bench

# issue 32's targets at P = 2 (checked at P = 2 only): (batch, variant or None for the best, speedup)
MPI_TARGETS = ((512, None, 1.8), (64, None, 1.4), (64, "shm", 1.5))


def mpi_batch(batch, groups):
    """one batch's table; returns the largest P of the mpi rows (the cores: mpi-bench runs 1
    and C) and [(speedup, variant, comm)] of its rows"""
    ser = next((v for k, v in groups.items() if k[:2] == (batch, "serial")), None)
    t_ser = med(t for t, _, _, _ in ser) if ser else None
    b_ser = min(b for _, _, b, _ in ser) if ser else None
    print(f"\nbatch {batch}:")
    print(f"  {'program':<8} {'variant':<13} {'P':>2} {'runs':>4} {'epoch s':>8} {'comm s':>8} {'comm %':>7} {'speedup':>8}"
          f" {'fastest s':>10} {'speedup':>8}")
    best, rows = [], []
    pmax = max((k[3] for k in groups if k[0] == batch and k[1] == "mpi"), default=0)
    for key in sorted(groups, key=lambda k: (k[1] != "serial", k[3], k[2])):
        if key[0] != batch:
            continue
        v = groups[key]
        t = med(x for x, _, _, _ in v)
        c = med(y for _, y, _, _ in v)
        b = min(z for _, _, z, _ in v)
        rows += [r for *_, r in v]
        sp = t_ser / t if t_ser else float("nan")
        spb = b_ser / b if b_ser else float("nan")
        print(f"  {key[1]:<8} {key[2]:<13} {key[3]:>2} {partrain.runs_cell([r for *_, r in v]):>4} {t:8.3f} {c:8.4f} "
              f"{100 * c / t:6.1f}% {sp:7.2f}x {b:10.3f} {spb:7.2f}x")
        if key[1] == "mpi" and key[3] == pmax:
            best.append((sp, key[2], c))
    note = partrain.disturbed_note(rows)
    if note:
        print("  " + note)
    d = {name: c for _, name, c in best}
    if "overlap" in d and "allreduce" in d:
        print(f"  exposed communication per epoch at P = {pmax}: overlap {d['overlap']:.4f} s vs allreduce "
              f"{d['allreduce']:.4f} s (overlap hides {d['allreduce'] - d['overlap']:+.4f} s)")
    return pmax, best


def read_mpi_cores_log(path):
    """(batch, variant, P) -> per run (round), each rank's compute us/sample (None when none printed)"""
    gw = {}
    with open(path) as f:
        for line in f:
            b, v, p, vals = line.split()
            ws = [float(x) for x in vals.split(",")] if vals != "-" else []
            gw.setdefault((int(b), v, int(p)), []).append(ws if ws and all(w > 0 for w in ws) else None)
    return gw


def mpi_vs_openmp(groups, gw, workers, out=None):
    """MPI+MPI vs MPI+OpenMP: mpi shm and allreduce at P = workers beside openmp reduction with
    that many threads: the median of the same-round ratios against serial, the per-round core
    bound (workers x the slowest rank's speed against P = 1's, from compute us/sample: each rank's
    compute phase per row of its own) and the ratio as a fraction of it"""
    print(f"\nMPI+MPI vs MPI+OpenMP at {workers} workers (speedup: median over the rounds of serial's epoch / the "
          "configuration's in the same round;")
    print(f" bound: {workers} x the slowest rank's compute speed against P = 1's, that round; openmp: against the "
          "shm run's bound)")
    for batch in sorted({k[0] for k in groups}):
        ser = next(([t for t, _, _, _ in v] for k, v in groups.items() if k[:2] == (batch, "serial")), [])
        if not ser:
            continue
        print(f"  batch {batch}:")
        bounds = {}
        for v in ("allreduce", "shm"):
            one, many = gw.get((batch, v, 1), []), gw.get((batch, v, workers), [])
            bounds[v] = [len(m) * min(o[0] / w for w in m) if o and m and len(o) == 1 else None
                         for o, m in zip(one, many)]
        for prog, v, key in (("mpi", "allreduce", "allreduce"), ("mpi", "shm", "shm"), ("openmp", "owner", "shm"),
                             ("openmp", "reduction", "shm")):
            runs_ = groups.get((batch, prog, v, workers), [])
            if not runs_:
                continue
            sp = [s_ / t for s_, (t, _, _, _) in zip(ser, runs_)]
            if out is not None:
                out += [(prog, v, 1 if prog == "openmp" else workers, workers if prog == "openmp" else 1, batch,
                         i, x_, b) for i, (x_, b) in enumerate(zip(sp, bounds.get(key, [])), 1) if b]
            fr = [x / b for x, b in zip(sp, bounds.get(key, [])) if b]
            bd = [b for b in bounds.get(key, []) if b]
            print(f"    {prog:<7} {v:<10} speedup {med(sp):.2f}x (rounds: {fmt_rounds(sp)})"
                  + (f" | bound {med(bd):.2f}x | {med(fr):.2f} of the bound" if fr else " | bound not measured"))


def cmd_mpi(a):
    groups = {}
    for r in rows_since(a.csv, a.since, a.epochs, a.train):
        workers = int(r["threads"]) if r["program"] == "openmp" else int(r["ranks"])
        key = (int(r["batch"]), r["program"], r["variant"], workers)
        epochs_2_on = [float(x) for x in r["epoch_seconds"].split(";")[1:]] or [float(r["epoch_seconds_median"])]
        groups.setdefault(key, []).append((float(r["epoch_seconds_median"]), float(r["comm_seconds"] or 0),
                                           min(epochs_2_on), r))
    best, pmax = {}, 0
    for batch in sorted({k[0] for k in groups}):
        pmax, b = mpi_batch(batch, groups)
        if b:
            best[batch] = b
    if pmax == 2:
        print()
        for batch, variant, target in MPI_TARGETS:
            rows = [r for r in best.get(batch, []) if variant is None or r[1] == variant]
            if rows:
                sp, name, _ = max(rows)
                print(f"target: {variant or 'best variant'} at P = 2, batch {batch} >= {target:.2f}x serial: {name} "
                      f"{sp:.2f}x -> {'MET' if sp >= target else 'NOT MET'}")
    if a.cores_log:
        workers = max((k[3] for k in groups if k[1] == "openmp"), default=a.cores)
        bounds = []
        mpi_vs_openmp(groups, read_mpi_cores_log(a.cores_log), workers, bounds)
        write_bounds(a.bounds, bounds)
    return 0


# ---------------------------------------------------------------- cnn-bench

CNN_TORCH_TARGET = 0.2   # cnn 1x1's epoch / PyTorch 1 thread's, at most
CNN_TWO_CORES = 1.7      # speedup from 1x1 to the best 2-core configuration, at least (checked on 2 cores)
CNN_BOUND_TARGET = 0.9   # issue 32: the best 2-core configuration's fraction of its per-round core bound, at least


def cnn_order(groups):
    """the configurations present: cnn by (P, T), then pytorch by threads"""
    return sorted(groups, key=lambda k: (k[0] != "cnn", k[1], k[2]))


class CnnRuns:
    """the rows of one cnn-bench invocation, by (program, ranks, threads)"""

    def __init__(self, groups):
        self.groups = groups

    def med(self, key, col="epoch_seconds_median"):
        return med(float(r[col]) for r in self.groups[key]) if key in self.groups else None

    def rounds(self, num, den):
        """num / den within each round: the k-th rows of the two configurations (file order)"""
        a, b = self.groups.get(num, []), self.groups.get(den, [])
        return [float(x["epoch_seconds_median"]) / float(y["epoch_seconds_median"]) for x, y in zip(a, b)]

    def round_med(self, num, den):
        r = self.rounds(num, den)
        return med(r) if r else None


def cnn_table(g):
    base, torch1 = g.med(("cnn", 1, 1)), g.med(("pytorch", 1, 1))
    print(f"{'program':<8} {'P x T':>5} {'OMP_WAIT_POLICY':>15} {'runs':>4} {'epoch s':>8} {'(min..max)':>15} "
          f"{'samples/s':>10} {'comm s':>7} {'speedup':>8} {'/ torch 1T':>10}")
    for key in cnn_order(g.groups):
        rows = g.groups[key]
        e = g.med(key)
        lo = min(float(r["epoch_seconds_median"]) for r in rows)
        hi = max(float(r["epoch_seconds_median"]) for r in rows)
        pol = ",".join(sorted({r["omp_wait_policy"] or "unset" for r in rows}))
        sp = f"{g.round_med(('cnn', 1, 1), key):.2f}x" if key[0] == "cnn" and base else ""
        if key[0] == "pytorch" and torch1:
            sp = f"{g.round_med(('pytorch', 1, 1), key):.2f}x"
        ratio = f"{g.round_med(key, ('pytorch', 1, 1)):.3f}" if torch1 else ""
        print(f"{key[0]:<8} {key[1]}x{key[2]:<3} {pol:>15} {partrain.runs_cell(rows):>4} {e:8.3f} "
              f"{f'({lo:.3f}..{hi:.3f})':>15} "
              f"{g.med(key, 'samples_per_second'):10.0f} {g.med(key, 'comm_seconds'):7.3f} {sp:>8} {ratio:>10}")
    print("(speedup: cnn rows over cnn 1x1, pytorch rows over pytorch 1 thread, each the median of the same-round")
    print(" ratios; P x T for pytorch = 1 x threads)")
    print_note([r for key in cnn_order(g.groups) for r in g.groups[key]])


def fmt_rounds(rs):
    return " ".join(f"{x:.2f}" for x in rs)


def cnn_targets(g, cores):
    base, torch1 = g.med(("cnn", 1, 1)), g.med(("pytorch", 1, 1))
    if base and torch1:
        r = g.round_med(("cnn", 1, 1), ("pytorch", 1, 1))
        print(f"target 1x1 <= {CNN_TORCH_TARGET} x PyTorch 1-thread epoch: {r:.3f} (rounds: "
              f"{fmt_rounds(g.rounds(('cnn', 1, 1), ('pytorch', 1, 1)))})"
              f" -> {'MET' if r <= CNN_TORCH_TARGET else 'MISSED'}")
    two = [(g.round_med(("cnn", 1, 1), k), k) for k in (("cnn", 1, cores), ("cnn", cores, 1)) if k in g.groups and base]
    if two and cores == 2:
        s, k = max(two)
        detail = "; ".join(f"{c[1]}x{c[2]} {v:.2f}x, rounds: {fmt_rounds(g.rounds(('cnn', 1, 1), c))}, ratio of the "
                           f"medians {base / g.med(c):.2f}x" for v, c in two)
        print(f"target >= {CNN_TWO_CORES}x at 2 cores: best {k[1]}x{k[2]} {s:.2f}x -> "
              f"{'MET' if s >= CNN_TWO_CORES else 'MISSED'} ({detail})")


def read_cores_log(path):
    """(P, T) -> per run, each worker's conv us/sample (None when the run printed none)"""
    conv = {}
    with open(path) as f:
        for line in f:
            p, t, vals = line.split()
            ws = [float(v) for v in vals.split(",")] if vals != "-" else []
            conv.setdefault((int(p), int(t)), []).append(ws if ws and all(w > 0 for w in ws) else None)
    return conv


def cnn_core_speeds(g, conv, cores, out=None):
    """how fast the cores ran in each round (conv us/sample of every worker, this invocation)"""
    base_conv = conv.get((1, 1), [])
    if cores < 2 or not base_conv or not any(k in conv for k in ((1, cores), (cores, 1))):
        return
    print()
    print("how fast the cores ran: each worker's conv time per sample against 1x1's in the same round (1.00 = as fast);")
    print(f"bound = the most any sharing of the work could give on those cores (1x{cores}: the sum; {cores}x1: "
          f"{cores} times the slower)")
    fractions = []
    for c, how in (((1, cores), "sum"), ((cores, 1), "min")):
        if c not in conv:
            continue
        sp, ratio_rows = g.rounds(("cnn", 1, 1), ("cnn",) + c), []
        for i, (b, ws) in enumerate(zip(base_conv, conv[c])):
            if not b or not ws or len(b) != 1 or i >= len(sp):
                continue
            speeds = [b[0] / w for w in ws]
            bound = sum(speeds) if how == "sum" else len(speeds) * min(speeds)
            ratio_rows.append((sp[i], speeds, bound))
            if out is not None:   # the variant the configuration ran (cnn-bench: cnn/cnn's default --sync)
                out.append(("cnn", g.groups[("cnn",) + c][i].get("variant", ""), c[0], c[1], 32, i + 1, sp[i], bound))
        if not ratio_rows:
            continue
        for i, (s, speeds, bound) in enumerate(ratio_rows, 1):
            print(f"  {c[0]}x{c[1]} round {i}: speedup {s:.2f}x | cores at {', '.join(f'{v:.2f}' for v in speeds)}"
                  f" of 1x1's speed -> bound {bound:.2f}x | {s / bound:.2f} of the bound")
        eff = med(s / b for s, _, b in ratio_rows)
        print(f"  {c[0]}x{c[1]} medians over the rounds: bound {med(b for _, _, b in ratio_rows):.2f}x, "
              f"speedup {med(s for s, _, _ in ratio_rows):.2f}x, fraction of the bound {eff:.2f} "
              f"(that fraction of {cores} cores as fast as 1x1's: {cores * eff:.2f}x)")
        fractions.append((eff, f"{c[0]}x{c[1]}"))
    if fractions and cores == 2:
        eff, name = max(fractions)
        print(f"target: best at 2 cores >= {CNN_BOUND_TARGET} of the core bound: {name} {eff:.2f} -> "
              f"{'MET' if eff >= CNN_BOUND_TARGET else 'MISSED'}")


def cmd_cnn(a):
    groups = {}
    for r in rows_since(a.csv, a.since, a.epochs, a.train):
        if r["batch"] != "32" or r["hidden"] != "conv8":
            continue
        groups.setdefault((r["program"], int(r["ranks"]), int(r["threads"])), []).append(r)
    g = CnnRuns(groups)
    cnn_table(g)
    cnn_targets(g, a.cores)
    bounds = []
    cnn_core_speeds(g, read_cores_log(a.cores_log), a.cores, bounds)
    write_bounds(a.bounds, bounds)
    return 0


# ---------------------------------------------------------------- hybrid-bench, hybrid-grid


HYBRID_TARGET = 1.8   # issue 32: the best P x T on 2 cores over serial, any batch


def cmd_hybrid(a):
    """per batch, the medians of each P x T (hybrid-bench.sh's rows of one invocation, in run
    order: the k-th row of each configuration is round k's) and, with --corun-log, the
    per-round core bound of the P x T = --cores configurations"""
    rows = partrain.read_csv(a.csv)
    corun = read_corun_log(a.corun_log) if a.corun_log else None
    bounds = []
    groups, batches = {}, []
    for r in rows:
        cfg = "serial" if r["program"] == "serial" else f"{r['ranks']}x{r['threads']}"
        groups.setdefault((r["batch"], cfg), []).append(r)
        if r["batch"] not in batches:
            batches.append(r["batch"])
    ds = f"{rows[-1]['dataset']} {rows[-1]['train_n']} samples" if rows else ""
    best = []   # (speedup, "P x T, batch b") of the configurations on --cores cores
    for b in sorted(batches, key=int):
        ser = groups.get((b, "serial"), [])
        print(f"\n{ds}, batch {b}, medians of {len(ser)} runs (epoch = median of epochs 2..E):")
        print(f"{'P x T':<7} {'OMP_WAIT_POLICY':<16} {'epoch s':>10} {'comm s':>10} {'barriers s':>12} {'speedup':>9} "
              f"{'runs':>5}")
        base = partrain.col_median(ser, "epoch_seconds_median")
        cfgs = ["serial"] + sorted({c for bb, c in groups if bb == b and c != "serial"},
                                   key=lambda c: tuple(int(v) for v in c.split("x")))
        for cfg in cfgs:
            rs = groups.get((b, cfg))
            if not rs:
                continue
            t = partrain.col_median(rs, "epoch_seconds_median")
            print(f"{cfg:<7} {rs[-1]['omp_wait_policy'] or 'unset':<16} {t:10.3f} "
                  f"{partrain.col_median(rs, 'comm_seconds'):10.3f} {partrain.col_median(rs, 'sync_seconds'):12.3f} "
                  f"{base / t:8.2f}x {partrain.runs_cell(rs):>5}")
            if cfg != "serial" and int(cfg.split("x")[0]) * int(cfg.split("x")[1]) == a.cores:
                best.append((base / t, f"{cfg}, batch {b}"))
        print_note([r for cfg in cfgs for r in groups.get((b, cfg), [])])
        if corun is not None:
            full = [c for c in cfgs[1:] if int(c.split("x")[0]) * int(c.split("x")[1]) == a.cores]
            corun_bounds(int(b), {k: float(r["epoch_seconds_median"]) for k, r in enumerate(ser)},
                         corun.get(int(b), []), a.cores,
                         [(c, "hybrid", groups[(b, c)][0]["variant"], int(c.split("x")[0]), int(c.split("x")[1]),
                           [(k, float(r["epoch_seconds_median"])) for k, r in enumerate(groups[(b, c)])]) for c in full],
                         bounds)
    if best and a.cores == 2:
        sp, name = max(best)
        print(f"\ntarget: best at 2 cores >= {HYBRID_TARGET}x serial: {name} {sp:.2f}x -> "
              f"{'MET' if sp >= HYBRID_TARGET else 'NOT MET'}")
    if corun is not None:
        write_bounds(a.bounds, bounds)
    return 0


def grid_points(rows):
    """the latest serial row's epoch text and 'P T epoch_s speedup policy' lines of the
    latest hybrid row per (P, T) (file order), sorted, the latest hybrid row, and the rows
    chosen (serial first); Nones when either is missing"""
    ser, cells, last = None, {}, None
    for r in rows:
        if r["program"] == "serial":
            ser = r
        elif r["program"] == "hybrid":
            cells[(int(r["ranks"]), int(r["threads"]))] = r
            last = r
    if ser is None or not (partrain.num(ser["epoch_seconds_median"]) or 0) > 0 or not cells:
        return None, None, None, None
    s = float(ser["epoch_seconds_median"])
    lines = [f"{p} {t} {float(r['epoch_seconds_median']):.4f} {s / float(r['epoch_seconds_median']):.3f} "
             f"{r['omp_wait_policy'] or 'unset'}" for (p, t), r in sorted(cells.items())]
    return ser["epoch_seconds_median"], lines, last, [ser] + [r for _, r in sorted(cells.items())]


def table4(rows, dat_lines, serial_s, data, batch, epochs, cores, chosen=()):
    """seed report 001's Table 4 with hybrid/hybrid's measured speedups beside its ranges
    (CHOSEN: the rows of the points, serial first: a disturbed one is marked in its cell)"""
    pts = {tuple(int(v) for v in ln.split()[:2]): ln.split() for ln in dat_lines}
    marked = {(int(r["ranks"]), int(r["threads"])) for r in chosen[1:] if partrain.disturbed(r)}
    ser_mark = ", disturbed" if chosen and partrain.disturbed(chosen[0]) else ""

    def get(p, t):   # from the .dat line, as written (its rounding, then the table's)
        v = pts.get((p, t))
        dist = ", disturbed" if (p, t) in marked else ""
        return f"{float(v[3]):.2f}x ({float(v[2]):.3f} s, {v[4]}{dist})" if v else ""

    def rng(kind, p, t):
        lo, hi = seeds.SEED001_EXPECTED[(kind, p, t)]
        return f"{lo:.1f}-{hi:.1f}x"
    first = rows[0] if rows else {}
    return [
        "# Seed report 001, Table 4 (\"expected speedup\") vs hybrid/hybrid measured", "",
        f"{first.get('train_n', '')} samples of {first.get('dataset', '')} ({data}), default MLP, global batch "
        f"{batch}, median of epochs 2..{epochs};",
        f"speedup = serial/serial's epoch ({serial_s} s, one core{ser_mark}) / the configuration's. Measured",
        f"on {cores} cores: every configuration above {cores} ranks x threads is oversubscribed, so the",
        f"hardware ceiling is {cores}x" + (" and the report's ranges (written for 4 and 8 cores) cannot be reached."
                                           if cores < 8 else "; the report's ranges were written for 4 and 8 cores."),
        "OpenMP and MPI rows are hybrid/hybrid with P = 1 (threads only) or T = 1 (ranks only).", "",
        "| Implementation | Configuration | Expected speedup (report) | Measured here (P x T) |",
        "|---|---|---|---|",
        f"| Serial | 1 core | 1.0x (baseline) | 1.00x (serial/serial); hybrid 1x1: {get(1, 1)} |",
        f"| OpenMP | 4 threads | {rng('OpenMP', 1, 4)} | 1x4: {get(1, 4) or 'not in the grid'} |",
        f"| OpenMP | 8 threads | {rng('OpenMP', 1, 8)} | 1x8: {get(1, 8) or 'not in the grid'} |",
        f"| MPI | 4 processes | {rng('MPI', 4, 1)} | 4x1: {get(4, 1) or 'not in the grid'} |",
        f"| MPI | 8 processes | {rng('MPI', 8, 1)} | 8x1: {get(8, 1) or 'not in the grid'} |",
        f"| Hybrid | 2x2 (4 total) | {rng('Hybrid', 2, 2)} | 2x2: {get(2, 2) or 'not in the grid'} |",
        f"| Hybrid | 2x4 (8 total) | {rng('Hybrid', 2, 4)} | 2x4: {get(2, 4) or 'not in the grid'} |", "",
        f"On all {cores} cores: " + "; ".join(f"{p}x{t} {get(p, t)}" for p, t in sorted(pts) if p * t == cores) + "."] + (
        ["", f"\"disturbed\": {partrain.n_disturbed(chosen)} of these {len(chosen)} runs had other processes' load above "
             "--max-other cores during them (CSV columns other_load_cores, disturbed), so their times may be too slow."]
        if partrain.n_disturbed(chosen) else [])


def cmd_hybrid_grid(a):
    """DAT (and with --table, seed report 001's Table 4) from the grid's rows; prints the
    figure's title line (hybrid-grid.png) or, with --table, serial's time and the points"""
    rows = partrain.read_csv(a.csv)
    serial_s, lines, last, chosen = grid_points(rows)
    if lines is None:
        print(f"{PROG}: no hybrid and serial rows in {a.csv}", file=sys.stderr)
        return 1
    with open(a.dat, "w") as f:
        f.write("".join(ln + "\n" for ln in lines))
    cores = a.cores
    if not a.table:
        print(f"hybrid/hybrid, {last['train_n']} samples of {last['dataset']}, batch {last['batch']}, {cores} cores "
              f"(serial/serial {float(serial_s):.3f} s per epoch on one core){partrain.disturbed_count(chosen)}")
        return 0
    with open(a.table, "w") as f:
        f.write("\n".join(table4(rows, lines, serial_s, a.data, a.batch, a.epochs, cores, chosen)) + "\n")
    print(f"serial: {serial_s} s per epoch; grid (P T epoch_s speedup policy){partrain.disturbed_count(chosen)}:")
    print("\n".join(lines))
    return 0


def main(argv):
    ap = argparse.ArgumentParser(prog=PROG, description="the bench/*.sh scripts' tables")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("openmp", "mpi", "cnn"):
        sp = sub.add_parser(name)
        sp.add_argument("csv")
        sp.add_argument("--since", default="")
        sp.add_argument("--epochs", required=True)
        sp.add_argument("--train", type=int, default=0)
        if name == "openmp":
            sp.add_argument("--corun-log", help="bench/openmp-bench.sh's copies of serial at once, per round")
        if name in ("cnn", "mpi", "openmp"):
            if name != "openmp":
                sp.add_argument("--cores-log", required=name == "cnn")
            sp.add_argument("--bounds", metavar="OUT", help="write the per-round core bounds to OUT (CSV)")
            sp.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)),
                            help="the cores the configurations assumed (default: as nproc)")
    sp = sub.add_parser("hybrid")
    sp.add_argument("csv")
    sp.add_argument("--corun-log", help="bench/hybrid-bench.sh's copies of serial at once, per round")
    sp.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)), help="default: as nproc")
    sp.add_argument("--bounds", metavar="OUT", help="write the per-round core bounds to OUT (CSV)")
    sp = sub.add_parser("hybrid-grid")
    sp.add_argument("csv")
    sp.add_argument("--dat", required=True)
    sp.add_argument("--table")
    sp.add_argument("--data", default="")
    sp.add_argument("--batch", default="")
    sp.add_argument("--epochs", default="")
    sp.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)), help="default: as nproc")
    a = ap.parse_args(argv)
    try:
        return {"openmp": cmd_openmp, "mpi": cmd_mpi, "cnn": cmd_cnn, "hybrid": cmd_hybrid,
                "hybrid-grid": cmd_hybrid_grid}[a.cmd](a)
    except (partrain.CSVError, OSError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
