"""
scripts/reporting/seed002.py — seed report 002 (França Sobreira and Guedes Carneiro,
"Distributed Neural Network Training"): duration and speedup vs image size (its Figure 5)
and speedup vs node count (Figures 6-8).
"""

import glob
import os

from reporting.common import (agg, best, flags, latest_config, num, pct, pol, ratio, runs, select, serial_of, speedup,
                              syncs_of, x)
from seeds import SEED002

S = SEED002


def seed002(d):
    d.add("## Seed report 002", "")
    inputs = [side * side for side in S["sides"]]
    d.para("França Sobreira and Guedes Carneiro (Unicamp, \"Distributed Neural Network Training\") trained a "
           "single-layer network (no hidden layer) on MNIST with OpenMP, MPI+OpenMP (MPI_Reduce to a root, "
           f"MPI_Bcast of the parameters) and OmpCluster on up to {S['nodes']} cluster nodes, enlarging the images "
           f"({', '.join(f'{n:,}' for n in inputs)} inputs) to raise the work per sample; they plot duration and "
           "speedup against image size (Figure 5) and against the node count for each size (Figures 6–8).")
    sizes = figure5(d)
    sent = figures6_8(d)
    sent += size_sentences(d, sizes)
    d.shows(sent)


def size_row(rs):
    """serial, the best OpenMP with more than one thread, the best MPI with more than one
    rank, among the rows of one image size"""
    ser = serial_of(rs)
    omp = best([agg(rs, program="openmp", variant=v, threads=t) for v in
                sorted({r["variant"] for r in select(rs, program="openmp")})
                for t in sorted({r["threads"] for r in select(rs, program="openmp")}) if int(t) > 1])
    mpi = best([agg(rs, program="mpi", variant=v, ranks=p) for v in
                sorted({r["variant"] for r in select(rs, program="mpi")})
                for p in sorted({r["ranks"] for r in select(rs, program="mpi")}) if int(p) > 1])
    return ser, omp, mpi


def figure5(d):
    """the duration-vs-image-size table; {side: (serial, openmp, mpi)}"""
    i = d.i
    d.add("### Figure 5 — duration and speedup vs image size", "")
    png = next((os.path.basename(p) for dd in (i.plots, i.dir)
                for p in sorted(glob.glob(os.path.join(dd, "imagesize*.png")))), "imagesize.png")
    d.add(i.figure(png, "epoch time and speedup vs image size"), "")
    rows = i.rows("imagesize.csv")
    sizes = {}
    if rows is None:
        d.para(i.missing("imagesize.csv"))
        return sizes
    body = []
    for sz in sorted({int(num(r["image_size"])) for r in rows if num(r.get("image_size"))}):
        ser, omp, mpi = sizes[sz] = size_row(select(rows, image_size=sz))
        n = runs(ser, omp, mpi, sep=",")
        pols = ",".join(sorted({pol(a.policy) for a in (omp, mpi) if a})) or "–"
        body.append([f"{sz}×{sz}", f"{sz * sz:,}", ser.cell() if ser else "not run",
                     f"{ser.gflops:.1f}" if ser and ser.gflops else "–",
                     f"{omp.cell()}, {speedup(ser, omp)}, T = {omp.threads}" if omp else "not run",
                     f"{mpi.cell()}, {speedup(ser, mpi)}, P = {mpi.ranks}" if mpi else "not run",
                     pct(mpi.comm_share) if mpi else "–", pols, n])
    d.table(["image", "inputs", "serial epoch", "serial GFLOP/s", "OpenMP epoch, speedup", "MPI epoch, speedup",
             "MPI comm share", "OMP_WAIT_POLICY", "runs (serial,omp,mpi)"], body, "seed002-figure5",
            keep=["image", "inputs", "serial epoch", "OpenMP epoch, speedup", "MPI epoch, speedup", "MPI comm share",
                  "runs (serial,omp,mpi)"])
    r0 = rows[0] if rows else {}
    side = S["sides"][1]
    d.para(f"Ours: {r0.get('dataset', '?')} {r0.get('train_n', '?')} samples resampled (bilinear) to each "
           f"size, MLP {r0.get('hidden', '?')}, batch {r0.get('batch', '?')}; speedup over serial at the "
           f"same size. The report (1 node, MNIST, its 2-layer net): about {S['speedup_cpu']}× for OpenMP and "
           f"MPI+OpenMP at every image size on its multi-core node, about {S['speedup_gpu']}× on the GPU; serial "
           f"{S['gprof_seconds'] / S['gprof_epochs']:.2f} s per epoch at {S['sides'][0] ** 2} inputs (gprof, "
           f"{S['gprof_seconds']} s / {S['gprof_epochs']} epochs). Its Figure 7 caption says "
           f"{S['figure7_inputs']:,}; {side}² = {side * side:,}.")
    return sizes


def best_at(strong, p):
    return best([agg(strong, program="mpi", variant=v, ranks=p) for v in syncs_of(strong)])


def figures6_8(d):
    """speedup vs rank count from the strong-scaling sweep; the sentences about it"""
    i, cores = d.i, d.slots   # ranks: the rank slots (the cores on one node)
    d.add("### Figures 6–8 — speedup vs node count", "")
    strong = latest_config(i.rows("mpi-strong.csv"))
    if strong is None:
        d.para(i.missing("mpi-strong.csv"))
        return []
    ser = serial_of(strong)
    ranks = sorted({int(r["ranks"]) for r in select(strong, program="mpi")})
    body = []
    for p in ranks:
        a = best_at(strong, p)
        if a:
            body.append([str(p), flags("mpi", a.variant), a.cell(), speedup(ser, a),
                         pct(a.comm_share), "yes" if p > cores else "no", runs(a)])
    d.table(["ranks", "fastest variant", "epoch", "speedup vs serial", "comm share", "oversubscribed", "runs"], body)
    r0 = strong[0]
    d.para(f"{r0.get('train_n')} samples of {r0.get('image_size')}×"
           f"{r0.get('image_size')} images (784 inputs), batch {r0.get('batch')}, one rank "
           f"per core up to {cores} ranks; the full strong and weak tables are in *Scaling*. The report: "
           f"MPI+OpenMP near-linear up to {S['nodes']} nodes at every image size (no numbers published).")
    sent = []
    sp2 = [(p, ratio(ser.epoch, best_at(strong, p).epoch)) for p in ranks if ser and p > 1]
    inside = [(p, v) for p, v in sp2 if p <= cores]
    if inside:
        p, v = inside[-1]
        sent.append(f"At {p} ranks (this machine's {cores} cores) the best variant reaches {x(v)}, "
                    f"{pct(100 * v / p)} of linear — {'near-linear, as the report found' if v >= 0.85 * p else 'short of the near-linear scaling the report found'}.")
    beyond = [(p, v) for p, v in sp2 if p > cores]
    if beyond:
        sent.append("Beyond the cores the speedup " + ", ".join(f"at {p} ranks is {x(v)}" for p, v in beyond)
                    + ": extra ranks share cores, they add no compute.")
    return sent


def size_sentences(d, sizes):
    if not sizes:
        return []
    sent = []
    sp = {sz: ratio(t[0].epoch, t[2].epoch) for sz, t in sizes.items() if t[0] and t[2]}
    so = {sz: ratio(t[0].epoch, t[1].epoch) for sz, t in sizes.items() if t[0] and t[1]}
    gf = {sz: t[0].gflops for sz, t in sizes.items() if t[0] and t[0].gflops}
    if len(sp) >= 2:
        lo, hi = min(sp), max(sp)
        sent.append(f"MPI with {sizes[hi][2].ranks} ranks: " + ", ".join(f"{x(sp[k])} at {k * k:,}" for k in sorted(sp))
                    + " inputs "
                    f"({'more work per sample amortises the exchange, as the report argued' if sp[hi] > sp[lo] else 'larger images do not help here, unlike the report’s granularity argument'}).")
    if len(so) >= 2:
        th = sizes[max(so)][1].threads
        sent.append(f"OpenMP with {th} threads: " + ", ".join(f"{x(so[k])} at {k * k:,}" for k in sorted(so))
                    + " inputs.")
    if len(gf) >= 2:
        lo, hi = min(gf), max(gf)
        sent.append(f"Serial runs at {gf[lo]:.0f} GFLOP/s at {lo}×{lo} and {gf[hi]:.0f} GFLOP/s at {hi}×{hi}"
                    f"{': the bigger first layer does not make it more efficient' if gf[hi] < 0.9 * gf[lo] else ''}.")
    best_any = max(list(sp.values()) + list(so.values()) or [0])
    if best_any:
        sent.append(f"The best speedup here is {x(best_any)} on {d.cores} cores against the report's "
                    f"≈{S['speedup_cpu']}× on one node of its cluster.")
    return sent
