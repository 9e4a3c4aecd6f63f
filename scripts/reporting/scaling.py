"""
scripts/reporting/scaling.py — the Scaling section: mpi/mpi's strong and weak scaling per
--sync variant, and mpi/pipeline's bubble against GPipe's formula.
"""

import re

from reporting.common import (agg, best, latest_config, pct, pol, ratio, runs, s, select, serial_of, speedup, syncs_of,
                              x)


def scaling(d):
    i = d.i
    d.add("## Scaling", "")
    d.add(i.figure("mpi-scaling.png", "mpi/mpi: epoch time and speedup vs ranks, strong and weak scaling"), "")
    d.add(i.figure("mpi-comm.png", "mpi/mpi: share of the epoch spent in MPI calls per --sync"), "")
    sent = strong(d)
    sent += weak(d)
    sent += pipeline(d)
    d.shows(sent)


def oversub(p, cores, policy):
    return ("oversubscribed, " if p > cores else "") + pol(policy)


# ---------------------------------------------------------------- strong


def strong(d):
    i, cores = d.i, d.slots   # ranks: the rank slots (the cores on one node)
    rows = latest_config(i.rows("mpi-strong.csv"))
    d.add("### Strong scaling (fixed training set)", "")
    if rows is None:
        d.para(i.missing("mpi-strong.csv"))
        return []
    ser = serial_of(rows)
    body, sp = [], {}
    syncs = syncs_of(rows)
    for v in syncs:
        for p in sorted({int(r["ranks"]) for r in select(rows, program="mpi", variant=v)}):
            a = agg(rows, program="mpi", variant=v, ranks=p)
            sp[(v, p)] = (ratio(ser.epoch, a.epoch) if ser else None, a)
            body.append([v, str(p), a.cell(), speedup(ser, a), a.cell("comm_seconds"), pct(a.comm_share),
                         oversub(p, cores, a.policy), runs(a)])
    head = ["--sync", "ranks", "epoch", "speedup vs serial", "in MPI calls", "comm share", "OMP_WAIT_POLICY", "runs"]
    d.table(head, body, "scaling-strong", keep=[h for h in head if h != "OMP_WAIT_POLICY"])
    r0 = rows[0]
    d.para(f"{r0.get('train_n')} {r0.get('dataset')} samples, global batch {r0.get('batch')}, "
           f"{r0.get('epochs')} epochs per run; serial/serial {ser.cell() if ser else '–'} per epoch. "
           f"Ranks above the {cores} cores run oversubscribed with `mpi_yield_when_idle` (no OpenMP in "
           "these runs, so OMP_WAIT_POLICY does not apply).")
    if not sp:
        return []
    return [peak_sentence(sp)] + stop_sentences(sp, syncs, cores) + [overlap_sentence(sp, cores)]


def peak_sentence(sp):
    (bv, bp), (bs, ba) = max(sp.items(), key=lambda kv: kv[1][0] or 0)
    if bp > 1:
        return (f"Strong scaling peaks at {bp} ranks with `{bv}`: {x(bs)} over serial, "
                f"{pct(ba.comm_share)} of its epoch in MPI calls.")
    multi = max(((k, v) for k, v in sp.items() if k[1] > 1), key=lambda kv: kv[1][0] or 0, default=None)
    return "No rank count beats one rank here" + (
        f": the best with more ranks is {multi[0][1]} ranks with `{multi[0][0]}` at "
        f"{x(multi[1][0])} serial, {pct(multi[1][1].comm_share)} of its epoch in MPI calls."
        if multi else ".")


def stop_sentences(sp, syncs, cores):
    """where each variant stops scaling (its speedup falls from one rank count to the next)"""
    stops, sent = {}, []
    for v in syncs:
        ps = sorted(p for (vv, p) in sp if vv == v)
        stop = next((p for a_, p in zip(ps, ps[1:]) if (sp[(v, p)][0] or 0) < (sp[(v, a_)][0] or 0)), None)
        if stop:
            stops.setdefault(stop, []).append(v)
    for stop, vs in sorted(stops.items()):
        shares = [sp[(v, stop)][1].comm_share for v in vs if sp[(v, stop)][1].comm_share is not None]
        who = (f"All {len(vs)} variants stop" if len(vs) == len({k[0] for k in sp}) > 1 else
               ", ".join(f"`{v}`" for v in vs) + (" stops" if len(vs) == 1 else " stop"))
        sent.append(f"{who} scaling at {stop} ranks ({', '.join(x(sp[(v, stop)][0]) for v in vs)}"
                    f"{'; ' + pct(min(shares)) + '–' + pct(max(shares)) + ' of the epoch in MPI calls' if shares else ''}"
                    f"{'; ' + str(stop) + ' ranks share ' + str(cores) + ' cores' if stop > cores else ''}).")
    return sent


def overlap_sentence(sp, cores):
    """how much communication --sync overlap hides, against the blocking allreduce at the
    most ranks both ran within the cores"""
    both = [p for v, p in sp if v == "overlap" and ("allreduce", p) in sp and 1 < p <= cores]
    if not both:
        return None
    p = max(both)
    o, a_ = sp[("overlap", p)][1], sp[("allreduce", p)][1]
    if o.comm is None or a_.comm is None:
        return None
    return (f"At {p} ranks `overlap` leaves {s(o.comm)} of communication exposed vs "
            f"{s(a_.comm)} inside `allreduce` ("
            + (f"it hides {pct(100 * (1 - o.comm / a_.comm))} of it)." if o.comm < a_.comm else
               "it hides nothing here; its epoch is "
               f"{x(ratio(o.epoch, a_.epoch))} allreduce's)."))


# ---------------------------------------------------------------- weak


def weak(d):
    i, cores = d.i, d.slots
    rows = latest_config(i.rows("mpi-weak.csv"), keys=("dataset", "hidden", "epochs", "image_size"))
    d.add("### Weak scaling (fixed samples per rank)", "")
    if rows is None:
        d.para(i.missing("mpi-weak.csv"))
        return []
    body, eff = [], {}
    syncs = syncs_of(rows)
    t1 = best([agg(rows, program="mpi", variant=v, ranks=1) for v in syncs])
    for v in syncs:
        for p in sorted({int(r["ranks"]) for r in select(rows, program="mpi", variant=v)}):
            a = agg(rows, program="mpi", variant=v, ranks=p)
            e = ratio(t1.epoch, a.epoch) if t1 else None
            eff[(v, p)] = (e, a)
            body.append([v, str(p), a.train_n, a.batch, a.cell(), pct(100 * e if e else None),
                         a.cell("comm_seconds"), pct(a.comm_share), oversub(p, cores, a.policy), runs(a)])
    d.table(["--sync", "ranks", "samples", "global batch", "epoch", "efficiency", "in MPI calls", "comm share",
             "OMP_WAIT_POLICY", "runs"], body, "scaling-weak",
            keep=["--sync", "ranks", "samples", "epoch", "efficiency", "comm share", "runs"])
    d.para(f"Efficiency = the fastest 1-rank epoch ({t1.cell() if t1 else '–'}, every rank's share "
           "of the work) / the epoch at P ranks: 100% means P ranks do P times the work in the same "
           "time.")
    inside = [(k, v) for k, v in eff.items() if 1 < k[1] <= cores and v[0]]
    if not inside:
        return []
    (bv, bp), (be, ba) = max(inside, key=lambda kv: kv[1][0])
    return [f"Weak scaling keeps {pct(100 * be)} efficiency at {bp} ranks at best (`{bv}`, "
            f"{pct(ba.comm_share)} of the epoch in MPI calls); seed report 001's claim of "
            f"near-constant time per sample {'holds' if be >= 0.9 else 'does not hold'} here."]


# ---------------------------------------------------------------- pipeline


def micro(v):
    """the micro-batch count M of a pipeline variant gpipe-mM (its --microbatches M)"""
    m = re.match(r"gpipe-m(\d+)", v)
    return int(m.group(1)) if m else None


def pipeline(d):
    i, cores = d.i, d.slots
    pipe = latest_config(i.rows("mpi-pipeline.csv"), keys=("dataset", "train_n", "hidden", "epochs", "batch"))
    d.add("### Pipeline bubble (mpi/pipeline, GPipe)", "")
    if pipe is None:
        d.para(i.missing("mpi-pipeline.csv"))
        return []
    body, worst = [], None
    for p in sorted({int(r["ranks"]) for r in pipe}):
        for v in sorted({r["variant"] for r in select(pipe, ranks=p)},
                        key=lambda v: int(re.sub(r"\D.*", "", v[len("gpipe-m"):]) or 0)):
            a = agg(pipe, program="pipeline", variant=v, ranks=p) or agg(pipe, variant=v, ranks=p)
            M = micro(v)
            if not a or M is None:
                continue
            theo = (p - 1) / (M + p - 1)
            meas = a.sync / (p * a.epoch) if a.sync is not None and a.epoch else None
            base = agg(pipe, variant=v, ranks=1)
            body.append([str(p), str(M), a.cell(), speedup(base, a),
                         pct(100 * meas if meas is not None else None), pct(100 * theo), a.cell("comm_seconds"),
                         oversub(p, cores, a.policy), runs(a)])
            if p > 1 and meas is not None and (worst is None or meas - theo > worst[0]):
                worst = (meas - theo, p, M, meas, theo)
    d.table(["stages P", "micro-batches M", "epoch", "vs 1 stage", "measured bubble", "theory (P−1)/(M+P−1)",
             "in MPI calls", "OMP_WAIT_POLICY", "runs"], body, "scaling-pipeline",
            keep=["stages P", "micro-batches M", "epoch", "vs 1 stage", "measured bubble", "theory (P−1)/(M+P−1)",
                  "runs"])
    d.para("Measured bubble = idle seconds summed over the stages (`sync_seconds`) / (P × epoch); the "
           "theory assumes equally heavy stages.")
    return pipeline_sentences(pipe, worst)


def pipeline_sentences(pipe, worst):
    sent = []
    pbest = best([agg(pipe, variant=r["variant"], ranks=r["ranks"]) for r in pipe if r["ranks"] != "1"])
    p1 = agg(pipe, variant=pbest.variant, ranks=1) if pbest else None
    if pbest and p1:
        r_ = ratio(p1.epoch, pbest.epoch)
        sent.append(f"The fastest pipeline is P = {pbest.ranks}, {pbest.variant}: {x(r_)} "
                    f"{'over' if r_ >= 1 else 'of'} one stage's speed ({s(pbest.epoch)} vs {s(p1.epoch)})"
                    f"{'' if r_ >= 1 else ', so splitting the layers does not pay here'}.")
    if worst:
        _, p, M, meas, theo = worst
        sent.append(f"The pipeline's measured bubble exceeds GPipe's formula most at P = {p}, M = {M}: "
                    f"{pct(100 * meas)} idle vs {pct(100 * theo)} — "
                    f"{'the stages are unequal (the first layer holds most of the FLOPs), so more micro-batches cannot fill it' if meas - theo > 0.1 else 'close to the formula'}.")
    return sent
