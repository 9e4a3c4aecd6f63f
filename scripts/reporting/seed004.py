"""
scripts/reporting/seed004.py — seed report 004 (Mekbib, "Parallelization of Deep Learning
Models"): sequential vs parallel on the CPU, and the GPU against the CPU.
"""

import shutil

from reporting.common import (agg, best, by_number, dname, flags, label, latest_config, modes_of, num, pol, ratio,
                              runs, s, select, serial_of, speedup, syncs_of, x)
from seeds import SEED004


def seed004(d):
    d.add("## Seed report 004", "")
    d.para("Mekbib (Addis Ababa University, \"Parallelization of Deep Learning Models\") trained a small "
           "sigmoid MLP on Fashion-MNIST in Python with mpi4py data parallelism (Scatter, Gather, Bcast) on "
           f"CPU and on GPU, and reports \"nearly {round(100 * (SEED004['cpu_speedup'] - 1))}%\" speedup of the "
           f"parallel over the sequential model on CPU, \"more than {round(100 * (SEED004['gpu_speedup'] - 1))}%\" on "
           "GPU, and the GPU slower than the CPU "
           "overall (Figure 4, no numbers).")
    d.add("### Sequential vs parallel on the CPU", "")
    sent = cpu(d)
    gpu_rows = [r for r in d.i.all_rows() if r.get("program") == "cuda"]
    if gpu_rows:
        sent += gpu(d, gpu_rows)
    else:
        found, _ = d.i.reasons("cuda")
        why = "; ".join(f"{st}: {rs}" for st, rs in found) or ("no GPU on the machine that generated this "
                                                                "report" if not shutil.which("nvidia-smi") else
                                                                "no cuda rows in the CSVs")
        d.para(f"GPU: no GPU measurement in this run ({why}). The report's GPU remark (slower than the CPU "
               "because of host-device copies for a small network) cannot be checked here; "
               "`scripts/gpu-check.sh` measures cuda/cuda on a GPU machine.")
    d.shows(sent)


def pickers(cores):
    """per benchmark CSV: the best configuration of its kind on all the cores, at batch b"""
    return (
        ("bench-openmp.csv", lambda r, b: best([agg(r, "bench-openmp.csv", program="openmp", variant=m, threads=cores,
                                                    batch=b) for m in modes_of(r)])),
        ("bench-mpi.csv", lambda r, b: best([agg(r, "bench-mpi.csv", program="mpi", variant=v, ranks=cores, batch=b)
                                             for v in syncs_of(r)])),
        ("bench-hybrid.csv", lambda r, b: best([agg(r, "bench-hybrid.csv", program="hybrid", ranks=p, threads=t,
                                                    batch=b) for p in range(1, cores + 1)
                                                for t in range(1, cores + 1) if p * t == cores])))


def cpu(d):
    i, cores = d.i, d.cores
    body, cands = [], []
    for name, pick in pickers(cores):
        rows = latest_config(i.rows(name))
        if rows is None:
            d.para(i.missing(name))
            continue
        for b in by_number({r["batch"] for r in rows}):
            ser, a = serial_of(rows, b), pick(rows, b)
            if ser and a:
                sp = ratio(ser.epoch, a.epoch)
                cands.append((sp, a, ser, b))
                body.append([b, label(a), ser.cell(), a.cell(), speedup(ser, a), pol(a.policy), runs(ser, a), name])
    body.sort(key=lambda r: int(num(r[0]) or 0))
    if body:
        head = ["batch", "parallel (best of its kind on all cores)", "sequential (serial)", "parallel",
                "speedup", "OMP_WAIT_POLICY", "runs (serial/parallel)", "source"]
        d.table(head, body, "seed004-cpu", keep=[h for h in head if h != "OMP_WAIT_POLICY"])
    if not cands:
        return []
    rep = SEED004["cpu_speedup"]
    sp, a, ser, b = max(cands, key=lambda c: c[0] or 0)
    sent = [f"The fastest parallel CPU configuration is {label(a)} "
            f"at batch {b}: {x(sp)} over sequential ({s(a.epoch)} vs {s(ser.epoch)}), "
            f"{'more than' if sp > rep else 'less than'} the report's ≈{rep}× (\"nearly "
            f"{round(100 * (rep - 1))}%\") on {cores} cores."]
    worst = min(cands, key=lambda c: c[0] or 0)
    if worst[0] is not None and worst[0] < 1:
        sent.append(f"Not every strategy pays: {label(worst[1])} at batch {worst[3]} is {x(worst[0])} serial.")
    return sent


def gpu(d, gpu_rows):
    i = d.i
    body, cands = [], []
    for f in sorted({r["_file"] for r in gpu_rows}):
        rows = latest_config(i.rows(f))
        for b in by_number({r["batch"] for r in select(rows, program="cuda")}):
            ser = serial_of(rows, b)
            for v in sorted({r["variant"] for r in select(rows, program="cuda", batch=b)}):
                for p in sorted({r["ranks"] for r in select(rows, program="cuda", batch=b, variant=v)}):
                    a = agg(rows, f, program="cuda", variant=v, ranks=p, batch=b)
                    sp = ratio(ser.epoch, a.epoch) if ser else None
                    body.append([b, f"cuda {flags('cuda', v)}" + (f", P = {p}" if p != "1" else ""), a.cell(),
                                 ser.cell() if ser else "–", speedup(ser, a), runs(a),
                                 f"{f}, {dname(a.dataset)} {a.train_n}"])
                    if p == "1" and sp is not None:
                        cands.append((sp, a, ser))
    d.add("### The GPU", "")
    d.table(["batch", "GPU", "epoch", "serial (CPU, 1 core)", "GPU speedup", "runs", "source"], body)
    if not cands:
        return []
    sp, a, ser = max(cands, key=lambda c: c[0])
    return [f"On the GPU, cuda {flags('cuda', a.variant)} takes {s(a.epoch)} per epoch: {x(sp)} one CPU "
            f"core's serial epoch ({s(ser.epoch)}) — "
            + ("the opposite of the report, whose GPU run was slower than its CPU run."
               if sp > 1 else "like the report, the GPU is slower than the CPU here.")]
