"""
scripts/reporting/mpimpi.py — the section "MPI+MPI vs MPI+OpenMP": within one node, ranks
that share the model through an MPI-3 shared-memory window (mpi/shm) against
threads that share it with the same scheme (openmp/openmp --accum owner) and through
per-thread gradient buffers (--accum reduction; all three train the same bits), and
against ranks that copy the gradient (--sync allreduce), from bench/mpi-bench.sh's rows
(bench-mpi.csv).

Speedups are the ratio of serial's epoch to the configuration's (central values over the
runs, reporting/common.py's rule), with the range of the ratios within one round (a round:
bench/mpi-bench.sh's k-th pass; every serial row of a batch starts one).
"""

from reporting.common import agg, by_number, latest_config, num, ratio, serial_of, speedup, x

CONFIGS = (("mpi", "allreduce", "mpi --sync allreduce"), ("mpi", "shm", "mpi/shm"),
           ("openmp", "owner", "openmp --accum owner"), ("openmp", "reduction", "openmp --accum reduction"))


def workers(r):
    return int(num(r["threads"]) if r["program"] == "openmp" else num(r["ranks"]))


def at(rows, b, program, variant, w):
    """the runs of one configuration with W workers at batch B"""
    return agg(rows, "bench-mpi.csv", program=program, variant=variant, batch=b,
               **({"threads": w} if program == "openmp" else {"ranks": w}))


def mpimpi(d):
    i = d.i
    d.add("## MPI+MPI vs MPI+OpenMP", "")
    rows = latest_config(i.rows("bench-mpi.csv"))
    if rows is None:
        d.para(i.missing("bench-mpi.csv"))
        return
    omp = [r for r in rows if r["program"] == "openmp"]
    if not omp:
        d.para("not measured in this run: bench-mpi.csv has no openmp rows (a bench/mpi-bench.sh from before "
               "the MPI+MPI comparison).")
        return
    w = max(workers(r) for r in omp)
    body, speed = [], {}
    for b in by_number({r["batch"] for r in rows}):
        ser = serial_of(rows, b)
        cells = []
        for p, v, _ in CONFIGS:
            a = at(rows, b, p, v, w)
            speed[(b, v)] = ratio(ser.epoch, a.epoch) if ser and a else None
            cells.append(speedup(ser, a) if ser and a else "–")
        body.append([b] + cells + [str(ser.n if ser else 0)])
    d.table(["batch"] + [f"{name}, {w} {'threads' if p == 'openmp' else 'ranks'}" for p, _, name in CONFIGS]
            + ["rounds"], body)
    d.para(f"Speedup over serial/serial: the ratio of the epochs over the runs, with the range of the same-round "
           f"ratios (bench/mpi-bench.sh, "
           f"{rows[0].get('train_n')} {rows[0].get('dataset')} samples, {rows[0].get('epochs')} epochs per run). "
           "`mpi/shm` keeps one copy of the model per node in an MPI-3 window, with every rank's activations and "
           "deltas: between two node barriers each rank forms its slice of the parameters' gradient sums from every "
           "rank's rows and updates the slice in place (docs/mpi.md). `openmp --accum owner` is the same scheme with "
           "threads, `--accum reduction` sums per-thread gradient buffers instead; all three train the same bits. "
           "The per-round core bound and each speedup's fraction of it are printed by the benchmark itself.")
    d.shows(sentences(speed, w))


def sentences(speed, w):
    out = []
    for b in sorted({k[0] for k in speed}, key=lambda v: int(num(v) or 0)):
        shm, allr = speed.get((b, "shm")), speed.get((b, "allreduce"))
        omp, red = speed.get((b, "owner")), speed.get((b, "reduction"))
        if shm is None or (omp is None and red is None):
            continue
        if omp is not None:   # the same scheme with threads
            who = "MPI+MPI (shm)" if shm > omp else "MPI+OpenMP (owner)"
            gap = abs(shm / omp - 1)
            s = (f"At batch {b} with {w} workers, shm runs at {x(shm)} and OpenMP threads with the same scheme at "
                 f"{x(omp)} of serial: " + ("within 5 % of each other, so sharing the model through a window costs "
                                           "ranks about what it costs threads" if gap <= 0.05 else
                                           f"{who} wins by {gap:.0%}"))
            if red is not None:
                s += (f"; threads summing per-thread gradient buffers (reduction, the same bits) give {x(red)}, "
                      + ("so forming each slice's sums from the rows, not from whole gradients, is worth "
                         f"{omp / red - 1:.0%}" if omp > red * 1.05 else "within 5 % of the owner scheme"))
        else:
            who = "MPI+MPI (shm)" if shm > red else "MPI+OpenMP (reduction)"
            gap = abs(shm / red - 1)
            s = (f"At batch {b} with {w} workers, shm runs at {x(shm)} and OpenMP threads at {x(red)} of serial: "
                 + ("within 5 % of each other" if gap <= 0.05 else f"{who} wins by {gap:.0%}"))
        if allr is not None:
            s += f"; copying the gradient through MPI_Allreduce gives {x(allr)}"
            if shm > allr * 1.05:
                s += ", so at this batch the copy, not the sharing, is what MPI ranks lose"
            elif allr > shm * 1.05:
                s += (f", {allr / shm - 1:.0%} ahead of sharing: at this batch the copy costs less than the "
                      "shared model's slice sums, barriers and cache traffic")
            else:
                s += ", within 5 % of sharing at this batch"
        out.append(s + ".")
    return out
