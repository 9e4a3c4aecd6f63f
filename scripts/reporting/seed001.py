"""
scripts/reporting/seed001.py — seed report 001 ("Parallelization of Deep Learning
Models", a master's assignment): its Table 4 of expected speedups beside the speedups
measured by the hybrid grid and by the OpenMP and MPI sweeps.
"""

from reporting.common import (agg, best, flags, latest_config, modes_of, pol, ratio, runs, s, serial_of, speedup,
                              syncs_of, x)
from seeds import SEED001_EXPECTED as EXPECTED


def seed001(d):
    i = d.i
    d.add("## Seed report 001", "")
    d.para("A master's assignment report (\"Parallelization of Deep Learning Models\") describing data "
           "parallelism of the 784-256-128-10 MLP with OpenMP (thread-local gradients summed in a critical "
           "section), MPI_Allreduce and hybrid MPI+OpenMP (MPI_THREAD_FUNNELED); its Table 4 lists *expected* "
           "speedups, not measurements.")
    d.add("### Table 4 — expected vs measured speedup", "")
    md = i.text("hybrid-table4.md")
    grid = latest_config(i.rows("hybrid-grid.csv"))
    if md:
        body = md.splitlines()
        if body and body[0].startswith("# "):
            body = body[1:]
        d.embed(body, "seed001-table4")
    else:
        d.para(i.missing("hybrid-table4.md"))
    d.add(i.figure("hybrid-grid.png", "hybrid/hybrid: epoch time and speedup over P ranks × T threads"), "")
    measured = grid_measured(grid)
    extra = sweep_rows(d, measured)
    if extra:
        d.add("The same rows measured by the dedicated trainers' sweeps (the grid stops at 4 workers per "
              "dimension; these include 8):", "")
        d.table(["implementation", "configuration", "expected (report)", "measured here", "OMP_WAIT_POLICY",
                 "runs", "source"], extra)
    sent = grid_sentences(d, grid) + [expected_sentence(d, measured)]
    if grid is None:
        d.para(i.missing("hybrid-grid.csv"))
    d.shows(sent)


def expected(kind, p, t):
    return "{:.1f}–{:.1f}×".format(*EXPECTED[(kind, p, t)])


def grid_measured(grid):
    """(kind, P, T) -> (speedup, what, Agg) for the report's configurations in the grid"""
    measured = {}
    if grid:
        ser = serial_of(grid)
        for (kind, p, t) in EXPECTED:
            a = agg(grid, program="hybrid", ranks=p, threads=t)
            if a and ser:
                measured[(kind, p, t)] = (ratio(ser.epoch, a.epoch), f"hybrid {p}×{t}", a)
    return measured


def sweep_rows(d, measured):
    """the report's OpenMP and MPI configurations from openmp.csv and mpi-strong.csv (which
    go to 8 workers); the faster of grid and sweep goes to MEASURED"""
    i, cores, extra = d.i, d.cores, []
    omp, strong = latest_config(i.rows("openmp.csv")), latest_config(i.rows("mpi-strong.csv"))
    kinds = (("OpenMP", omp, "openmp.csv"), ("MPI", strong, "mpi-strong.csv"))
    for kind, rows, name in kinds:
        if not rows:
            if rows is None:
                d.para(i.missing(name))
            continue
        for (k, p, t) in EXPECTED:
            if k != kind:
                continue
            if kind == "OpenMP":
                b_ = best([agg(rows, program="openmp", variant=m, threads=t) for m in modes_of(rows)])
            else:
                b_ = best([agg(rows, program="mpi", variant=v, ranks=p) for v in syncs_of(rows)])
            ser = serial_of(rows, b_.batch) if b_ else None
            if not (b_ and ser):
                continue
            sp = ratio(ser.epoch, b_.epoch)
            prog = "openmp" if kind == "OpenMP" else "mpi"
            what = f"{t} threads" if kind == "OpenMP" else f"{p} processes"
            policy = ("unset (no OpenMP; mpi_yield_when_idle)" if kind == "MPI" and p > cores else pol(b_.policy))
            extra.append([kind, what, expected(kind, p, t),
                          f"{speedup(ser, b_)} ({b_.cell()}, {prog} {flags(prog, b_.variant)}, batch {b_.batch})",
                          policy, runs(b_), name])
            if (kind, p, t) not in measured or sp > measured[(kind, p, t)][0]:
                measured[(kind, p, t)] = (sp, f"{prog} {'T' if kind == 'OpenMP' else 'P'} = {t * p}", b_)
    return extra


def grid_sentences(d, grid):
    cores, sent = d.cores, []
    if not grid:
        return sent
    ser = serial_of(grid)
    cells = [a for a in (agg(grid, program="hybrid", ranks=p, threads=t) for p in (1, 2, 4, 8)
                         for t in (1, 2, 4, 8)) if a]
    if ser and cells:
        top = best(cells)
        within = [a for a in cells if a.ranks * a.threads <= cores]
        over = [a for a in cells if a.ranks * a.threads > cores]
        sent.append(f"The best grid point is {top.cfg()} at {x(ratio(ser.epoch, top.epoch))} serial "
                    f"({s(top.epoch)} vs {s(ser.epoch)} per epoch, batch {top.batch}).")
        if over and within:
            bo, worst = best(over), max(over, key=lambda a: a.epoch)
            sent.append(f"Above the {cores} cores the best is {bo.cfg()} at "
                        f"{x(ratio(ser.epoch, bo.epoch))}; the worst, {worst.cfg()}, "
                        f"{x(ratio(ser.epoch, worst.epoch))} (OMP_WAIT_POLICY "
                        f"{','.join(sorted({pol(a.policy) for a in over}))}).")
    return sent


def expected_sentence(d, measured):
    if not measured:
        return None
    cores = d.cores
    real = d.i.machine.get("real_cores", cores)   # the machine that ran, not the sweep's --cores
    workers = [p * t for (_, p, t) in EXPECTED]
    met = [(k, v) for k, v in measured.items() if v[0] is not None and v[0] >= EXPECTED[k][0]]
    closest = max((v[0] for v in measured.values() if v[0]), default=None)
    return (f"{len(met)} of the {len(measured)} expected ranges we could measure "
            f"{'is' if len(met) == 1 else 'are'} reached"
            f"{' (' + ', '.join(v[1] for k, v in met) + ')' if met else ''}; the ranges assume "
            f"{min(workers)}–{max(workers)} cores; the sweep assumed {cores} and the runs had {real}, so "
            f"{min(cores, real)}× is the ceiling"
            f"{'; the closest of those configurations reaches ' + x(closest) if closest else ''}.")
