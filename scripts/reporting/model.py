"""
scripts/reporting/model.py — the Performance model section: the alpha-beta model of
scripts/model.py (docs/model.md) fitted to DIR/comm.csv (bench/comm.sh) and
DIR/model-runs.csv (bench/model-runs.sh): the fitted alpha, beta per transport and op,
the validation table (predicted vs measured epoch and comm seconds), the projection
figure (plots/model.png, scripts/plot.sh) and what it says about 16, 128 and 1024 nodes.
A missing input gives one "not measured" line naming the script that measures it.
"""

import os

import model as M
from reporting.common import table


def model(d):
    i = d.i
    d.add("## Performance model", "")
    comm_csv, runs_csv = i.path("comm.csv"), i.path("model-runs.csv")
    cm = comp = runs = None
    if not os.path.isfile(runs_csv):
        d.para(f"not measured: run bench/model-runs.sh ({runs_csv} missing)")
    else:
        try:
            runs = M.read_runs(runs_csv)
            comp = M.Compute(runs)
        except M.BadInput as e:
            d.para(f"not usable: {e}")
    if not os.path.isfile(comm_csv):
        d.para(f"not measured: run bench/comm.sh ({comm_csv} missing)")
    else:
        try:
            cm = M.CommModel(M.read_comm(comm_csv), M.measured_cores(runs))
        except M.BadInput as e:
            d.para(f"not usable: {e}")
    if cm:
        fits(d, cm)
    if comp:
        d.para(f"Compute per step on one core: t(b) = {comp.a * 1e3:.3f} ms + {comp.c * 1e6:.3f} µs × b "
               f"({comp.form}; residuals {', '.join(f'b = {b}: {r:+.1%}' for b, r in comp.resid)}). "
               + (f"`--sync overlap` hid {comp.hidden:.0%} of the allreduce in the trainers' runs (median of "
                  f"{len(comp.overlap_pairs)} overlap/allreduce pairs); the model hides no more than that."
                  if comp.overlap_pairs else "No overlap/allreduce pair was measured: the model's overlap hides nothing.")
               + "".join(f" Thread efficiency of {who} (serial's step / (T × openmp `--accum {v}`'s), interpolated in "
                         "the batch): " + "; ".join(f"T = {t}: " + ", ".join(f"b = {b}: {e:.2f}" for b, e in pts)
                                                    for t, pts in sorted(comp.eff.get(v, {}).items())) + "."
                         for v, who in (("reduction", "hybrid's threads"), ("owner", "a node's `--sync shm` ranks"))
                         if comp.eff.get(v))
               + ("" if comp.eff.get("reduction") else " No openmp reduction rows: hybrid's threads get the stated "
                  "efficiency 0.85."))
    if cm and comp:
        validate(d, cm, comp, runs)
    if comp:
        projection(d, cm, comp)


def fits(d, cm):
    d.add("### Fitted α, β (Hockney: a message of m bytes costs α + β·m)", "")
    body = []
    for (tr, op), f in sorted(cm.fits.items()):
        for k, (lo, a, b, res, algos) in enumerate(f.regimes):
            rms = (sum(r * r for r in res) / len(res)) ** 0.5 if res else 0.0
            body.append([tr, op, sizes(f, k), f"{a * 1e6:.2f}", f"{b * 1e9:.4f}",
                         f"{1e-9 / b:.2f}" if b > 0 else "–", str(len(res)), f"{rms:.1%}",
                         f"{max((abs(r) for r in res), default=0.0):.1%}",
                         ", ".join(f"{n} {v}" for n, v in sorted(algos.items()))])
    d.table(["transport", "op", "messages", "α (µs)", "β (ns/byte)", "GB/s", "rows", "rms residual",
             "max residual", "rows per algorithm"], body)
    d.para(f"Fitted on `max_us` (the slowest rank, which a training step waits for) of the rows with at most "
           f"{cm.cores} ranks (a core per rank, as on a cluster; rows with more ranks than the {cm.cores} cores are "
           "used only where a transport has no others"
           + (f": {', '.join(f'{a} {b}' for a, b in cm.shared)}" if cm.shared else "") + "), minimising the relative "
           "residuals; where one line leaves large residuals because the library changes protocol with the message "
           f"size (eager to rendezvous) or a shaped link its behaviour (a token bucket's burst, then its rate), up to "
           f"{M.MAX_REGIMES} are fitted over consecutive ranges of sizes split greedily where the data say (each split "
           f"cutting the squared residuals by {1 - M.SPLIT_GAIN:.0%} or more); a line above the smallest range holds "
           "only over its own sizes, so its α may be negative (large messages on a token-bucket link cost "
           "(m − burst)·β); the gradients use the line of their size. "
           "`allreduce` is fitted as the faster of ring and recursive doubling per row (as the library picks), "
           "`reduce-bcast` as two binomial trees, `barrier` as ⌈log₂P⌉·α, `hierarchical` as the leaders' "
           "allreduce with the node-local part taken from the shm fit.")
    spacing(d, cm)


def spacing(d, cm):
    rows = M.spacing_rows(cm)
    if not rows:
        d.para("No back-to-back rows (bench/comm --gap-rows; bench/comm.sh --gap-rows): every exchange is costed as "
               "measured OSU's way.")
        return
    body = [[tr, op, str(p), str(n), f"{m:,}", ", ".join(f"{g:,.0f} µs: {k:.2f}" for g, k in pts)]
            for tr, op, p, n, m, pts in rows]
    d.table(["transport", "op", "P", "nodes", "bytes", "factor after a step of (its measured time)"], body)
    d.para("Spacing factor: an exchange's time when the calls follow each other with one training step's "
           "computation between them (the MLP's forward and backward products on R rows, R = 16 … 512 in "
           "`bench/comm.sh`: `bench/comm --gap-rows R`) over its time OSU's way (the ranks meet before every "
           "call), at the same size, measured one after the other. The model multiplies the fitted exchange by "
           "this factor at the step's predicted computation (interpolated linearly in the step's time, constant "
           "beyond the measured ones). Over the shaped TCP links of the simulated cluster, whose kernel work "
           "shares the ranks' 2 cores, what the cores do between the calls changes an exchange's time by up to 2× "
           "(NOTES 38, 40). The projection has no such rows for its links and uses factor 1.")


def sizes(f, k):
    if len(f.regimes) == 1:
        return "all"
    lo = int(f.regimes[k][0])
    hi = int(f.regimes[k + 1][0]) if k + 1 < len(f.regimes) else None
    return f"< {human(hi)}" if k == 0 else f"≥ {human(lo)}" if hi is None else f"{human(lo)} – < {human(hi)}"


def human(n):
    for unit, div in (("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n:,} B"


def validate(d, cm, comp, runs):
    d.add("### Validation: predicted vs measured", "")
    beside_csv = d.i.path("comm-beside.csv")
    try:
        beside = M.read_comm(beside_csv) if os.path.isfile(beside_csv) else None
        val = M.validation(cm, comp, runs, 0.85, beside)
    except M.BadInput as e:
        d.para(f"not usable: {e}")
        return
    if not val:
        d.para("model-runs.csv has no mpi or hybrid rows to predict.")
        return
    body = []
    for v in val:
        body.append([v["label"] + (" (shares cores)" if v.get("shares_cores") else ""), v["transport"],
                     f"{v['pred']:.3f} s", f"{v['meas']:.3f} s",
                     f"{v['err']:+.1%}" if v["err"] is not None else "–", f"{v['pred_comm']:.3f} s",
                     f"{v['meas_comm']:.3f} s" if v["meas_comm"] is not None else "–",
                     f"{v['comm_err']:+.1%}" if v["comm_err"] is not None else "–",
                     f"{v['k_same']:.2f}" if v.get("k_same") is not None else "–",
                     f"{v['err_same']:+.1%}" if v.get("err_same") is not None else "–",
                     f"{v['runs']} ({v['disturbed']} disturbed)" if v["disturbed"] else str(v["runs"]),
                     f"{v['spread']:.0%}" if v.get("spread") is not None else "–"])
    d.table(["configuration", "transport", "predicted epoch", "measured epoch", "error", "predicted comm",
             "measured comm", "comm error", "exchange beside / fit", "error, same round", "runs",
             "runs' spread"], body)
    own = [v for v in val if v["err"] is not None and not v.get("shares_cores")]
    cerrs = [abs(v["comm_err"]) for v in own if v["comm_err"] is not None and v["meas_comm"] and v["meas_comm"] > 0]
    worst = max(own, key=lambda v: abs(v["err"])) if own else None
    d.para("The criterion is on the epoch time, over the configurations with a core per rank × thread, the "
           "model's domain (a node of C cores runs at most C workers)"
           + (f": max |error| **{abs(worst['err']):.1%}** ({worst['label']}, {worst['transport']}); "
              f"{sum(abs(v['err']) <= 0.2 for v in own)} of {len(own)} within 20 %." if worst else ": none measured.")
           + (" Configurations marked *shares cores* ran more workers than the machine's cores (every simulated host "
              "shares this machine's): their collectives wait for descheduled ranks, which a cluster does not do and "
              "the model does not predict; they are shown for reference ("
              + "; ".join(x for x in M.validation_summary(val) if "share cores" in x) + ")."
              if any(v.get("shares_cores") for v in val) else
              " Every configuration here had a core per rank × thread.")
           + (f" Comm seconds of the domain's configurations (inside MPI calls, mean over ranks, waiting for slower "
              f"ranks included): max |error| {max(cerrs):.0%}." if cerrs else "")
           + (" For `mpi shm` the predicted comm is all the node loses to the ideal split of the batch (openmp's "
              "thread efficiency: slice sums, cache traffic, barriers), the measured one only its barriers and window "
              "syncs: those two columns measure different things." if any(v["variant"] == "shm" for v in val) else "")
           + " Errors are predicted/measured − 1; medians over the runs of each configuration; *runs' spread* is "
           "the slowest run's epoch over the fastest's − 1, how far the measurement disagrees with itself."
           + "".join(f" {x[0].upper()}{x[1:]}." for x in M.validation_summary(val) if x.startswith("outside 20 %"))
           + same_round_sentence(own))


def same_round_sentence(own):
    """the same-round variant of the criterion, when bench/model-runs.sh measured the exchanges beside the runs"""
    if not any(v.get("err_same") is not None for v in own):
        return ""
    errs = [abs(v["err_same"] if v.get("err_same") is not None else v["err"]) for v in own]
    return (f" *Same round:* bench/model-runs.sh also timed each run's exchange with bench/comm just before the run "
            "(comm-beside.csv; column *exchange beside / fit*: that time over the fitted one); scaling the fitted "
            "exchange by it takes out how the machine drifted between the fit's measurements and the run (the "
            f"benchmarks' same-round ratios do the same): max |error| **{max(errs):.1%}**, "
            f"{sum(e <= 0.2 for e in errs)} of {len(errs)} within 20 % (where no exchange was measured beside a run: "
            "the first error).")


def projection(d, cm, comp):
    d.add("### Projection to 1 … 1024 nodes", "")
    d.add(d.i.figure("model.png", "alpha-beta model: efficiency vs nodes, exchange time vs message size, batch for 80 % efficiency")
          if os.path.isfile(os.path.join(d.i.plots, "model.png")) or os.path.isfile(d.i.path("model.png"))
          else "not drawn: plots/model.png missing (make plots draws it from the CSVs; gnuplot needed)", "")
    cl_ib = M.Cluster(comp, cm, alpha_us=M.ALPHA_IB_US)
    cl_tcp = M.Cluster(comp, cm, alpha_us=M.ALPHA_TCP_US)
    fitted = ", ".join(f"{tr} {f.latency * 1e6:.1f} µs" for (tr, op), f in sorted(cm.fits.items()) if op == "allreduce") \
        if cm else "none (no comm.csv)"
    d.para(f"A node is {cl_ib.cores} cores at the measured per-core rate (mpi: {cl_ib.cores} ranks per node; hybrid: one "
           f"rank of {cl_ib.cores} threads at a stated efficiency {cl_ib.E:g}); 60000 samples per epoch, the default "
           f"MLP ({cl_ib.m:,} bytes of gradient). Links of 10/100/400 Gbit/s with α = {M.ALPHA_IB_US:g} µs "
           f"(InfiniBand-like) or {M.ALPHA_TCP_US:g} µs (TCP-like); fitted α beside them: {fitted}.")
    body = []
    for n in (16, 128, 1024):
        row = [str(n)]
        for cl in (cl_ib, cl_tcp):
            for prog in ("mpi", "hybrid"):
                b = cl.batch_for(prog, n, 100)
                row.append(f"{b:,}" if b else "> 16M")
        body.append(row)
    d.table(["nodes", f"mpi, α {M.ALPHA_IB_US:g} µs", f"hybrid, α {M.ALPHA_IB_US:g} µs",
             f"mpi, α {M.ALPHA_TCP_US:g} µs", f"hybrid, α {M.ALPHA_TCP_US:g} µs"], body)
    d.para("The smallest global batch that keeps 80 % efficiency at 100 Gbit/s (efficiency of one step = the "
           "1-node step at the same global batch / (P × the P-node step), the fastest exchange; no data set of "
           "60000 samples caps the batch here, so batches above it say how far off such a scale is).")
    # which exchange wins where: one exchange at 100 Gbit/s, hybrid layout (one rank per node)
    body = []
    for n in (2, 16, 128, 1024):
        row = [str(n)]
        for m in (1024, 65536, cl_ib.m, 64 * 2 ** 20):
            t = {a: cl_ib.comm_step(a, "hybrid", n, m, 100) for a in ("ring", "recursive-doubling", "reduce-bcast")}
            t["hierarchical"] = cl_ib.comm_step("hierarchical", "mpi", n, m, 100)
            w = min(t, key=t.get)
            row.append(f"{w} ({t[w] * 1e3:.3g} ms)")
        body.append(row)
    d.table(["nodes", "1 KiB", "64 KiB", f"{cl_ib.m:,} B (the MLP)", "64 MiB"], body)
    d.para(f"The fastest exchange per node count and message size (α {M.ALPHA_IB_US:g} µs, 100 Gbit/s; "
           f"hierarchical with {cl_ib.cores} ranks per node against the others with one).")
    d.shows([
        "Small messages and few nodes are latency-bound: recursive doubling (log₂P messages) or reduce+broadcast "
        "win; large messages are bandwidth-bound: the ring sends 2(P−1)/P·m per rank, independent of P, and wins.",
        f"With {cl_ib.cores} ranks per node, a flat exchange pays latency for all {cl_ib.cores}·P ranks; the "
        "hierarchical one pays it only across the P leaders, so it wins for mpi.",
        "Efficiency at a fixed global batch falls with P because each node's share of the batch shrinks while "
        "the exchange does not: the batch needed for 80 % grows with P, more steeply at the TCP-like latency."])
