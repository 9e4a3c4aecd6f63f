"""
scripts/reporting/seed000.py — seed report 000 (Pilarski, "MNIST With Parallelism"): its
Table 1 (time per epoch per configuration, with the MPI cost), Figure 6 (time vs OpenMP
threads) and Figures 4-5 (loss and accuracy curves), each with ours beside it.
"""

from reporting.common import (Agg, agg, best, dname, flags, g, latest_config, modes_of, num, pct, plural, pol,
                              ratio, runs, s, select, serial_of, speedup, x)
from seeds import SEED000, seed000_row

S = SEED000
MPI_VARIANT = "allreduce"   # the report averaged every gradient over its machines: an allreduce
SOURCES = ("bench-mpi.csv", "bench-openmp.csv", "bench-hybrid.csv", "mpi-strong.csv", "hybrid-grid.csv", "openmp.csv")
BENCHES = ("bench-mpi.csv", "bench-openmp.csv", "bench-hybrid.csv")


def seed000(d):
    d.add("## Seed report 000", "")
    d.para("Pilarski (Georgia Tech, \"MNIST With Parallelism\") trained an MLP on MNIST in modular C with "
           f"OpenMP ({S['threads']} threads), a tiled CUDA matrix product and OpenMPI data parallelism "
           f"({S['machines']} machines, each on a quarter of the {S['machines'] * S['images_per_machine']:,} "
           "images), and reported time per epoch per configuration with the added \"MPI cost\" (Table 1), a "
           "U-shaped time-vs-threads curve (Figure 6) and accuracy/loss curves (Figures 4–5).")
    if not table1(d):
        return
    figure6(d)
    curves(d)


# ---------------------------------------------------------------- Table 1


def first(present, cands):
    """the first candidate (CSV name, picker) whose CSV is present and gives a timed configuration"""
    for name, fn in cands:
        rows = present.get(name)
        a = fn(rows, name) if rows else None
        if a and a.epoch is not None:
            return a
    return None


def with_src(a, src):
    return Agg(a.rows, src) if a else None


def cpu_configs(present, b, T, P):
    """Table 1's CPU configurations at batch b: naive (serial), OpenMP with T threads, MPI
    with P ranks, hybrid P x T; each from the first CSV that has it"""
    naive = first(present, [(n, lambda r, n_: with_src(serial_of(r, b), n_))
                            for n in ("bench-mpi.csv", "bench-hybrid.csv", "bench-openmp.csv", "mpi-strong.csv",
                                      "hybrid-grid.csv", "openmp.csv")])
    omp = first(present, [(n, lambda r, n_: best([agg(r, n_, program="openmp", variant=m, threads=T, batch=b)
                                                  for m in modes_of(r)])) for n in ("bench-openmp.csv", "openmp.csv")]
                + [(n, lambda r, n_: agg(r, n_, program="hybrid", ranks=1, threads=T, batch=b))
                   for n in ("bench-hybrid.csv", "hybrid-grid.csv")])
    mpi = first(present, [(n, lambda r, n_: agg(r, n_, program="mpi", variant=MPI_VARIANT, ranks=P, batch=b))
                          for n in ("bench-mpi.csv", "mpi-strong.csv")])
    hyb = first(present, [(n, lambda r, n_: agg(r, n_, program="hybrid", ranks=P, threads=T, batch=b))
                          for n in ("bench-hybrid.csv", "hybrid-grid.csv")])
    return naive, omp, mpi, hyb


def gpu_configs(cuda_rows, b, P):
    """the best tiled kernel (the report's CUDA code is a tiled matrix product; else any) on
    1 and P ranks at batch b, and the 1-rank run of the P-rank one's kernel"""
    kinds = sorted({r["variant"] for r in cuda_rows})
    tiled = [v for v in kinds if v.startswith("tiled")] or kinds
    cu1 = best([agg(cuda_rows, "", ranks=1, batch=b, variant=v) for v in tiled])
    cu2 = best([agg(cuda_rows, "", ranks=P, batch=b, variant=v) for v in tiled])
    for a_ in (cu1, cu2):
        if a_:
            a_.src = a_.rows[0].get("_file", "")
    cu1same = agg(cuda_rows, "", ranks=1, batch=b, variant=cu2.variant) if cu2 else None
    return cu1, cu2, cu1same


def measure(d, present, cuda_rows, b, T, P):
    """every configuration of Table 1 at batch b, and the MPI costs by the report's definition"""
    cores = d.cores
    naive, omp, mpi, hyb = cpu_configs(present, b, T, P)
    cu1, cu2, cu1same = gpu_configs(cuda_rows, b, P)

    def base_in(a, **eq):   # the non-MPI counterpart from the same file, else None
        rows = present.get(a.src) if a else None
        return agg(rows, a.src, **eq) if rows else None

    def excess(a, base, workers_a, workers_b):
        if not a or not base or a.epoch is None or base.epoch is None:
            return None
        return a.epoch - base.epoch * min(workers_b, cores) / min(workers_a, cores)

    def same_serial(a):   # serial/serial of the sweep that measured a, for its speedup
        return serial_of(present[a.src], b) if a and present.get(a.src) else None
    ser_same = same_serial(mpi) or naive
    omp_same = (base_in(hyb, program="hybrid", ranks=1, threads=T, batch=b) if hyb else None) or omp
    # one device per rank, as the report's one GPU per machine
    ex_cu = cu2.epoch - cu1same.epoch / P if cu2 and cu1same and cu1same.epoch else None
    return dict(naive=naive, omp=omp, mpi=mpi, hyb=hyb, cu1=cu1, cu2=cu2, ser_same=ser_same,
                ser_omp=same_serial(omp), ex_mpi=excess(mpi, ser_same, P, 1), ex_hyb=excess(hyb, omp_same, P * T, T),
                ex_cu=ex_cu)


def table1_rows(b, f, T, P):
    gpu_note = "no GPU row (no cuda program in the CSVs)"
    cu1, omp = f["cu1"], f["omp"]
    ours = {
        "cuda": (cu1, f"cuda/cuda {flags('cuda', cu1.variant)}" if cu1 else gpu_note, None),
        "omp": (omp, f"openmp {flags('openmp', omp.variant)}, T = {T}" if omp and omp.program == "openmp"
                else f"hybrid 1×{T}", None),
        "naive": (f["naive"], "serial/serial, 1 core", None),
        "cuda_mpi": (f["cu2"], f"cuda-mpi, P = {P}" if f["cu2"] else gpu_note, f["ex_cu"]),
        "omp_mpi": (f["hyb"], f"hybrid {P}×{T}", f["ex_hyb"]),
        "naive_mpi": (f["mpi"], f"mpi {flags('mpi', MPI_VARIANT)}, P = {P}", f["ex_mpi"]),
    }
    body = []
    for key, name, rep_t, rep_c in S["table1"]:
        a, lab, ex = ours[key]
        seed = f"{s(rep_t)} / {s(rep_c) if rep_c else 'N/A'}"
        if a is None:
            body.append([str(b), name, seed, lab if "GPU" in lab else "not measured", "–", "–", "–", "–", "0", ""])
            continue
        mpi_cell = a.cell("comm_seconds") if a.ranks > 1 else "N/A"
        body.append([str(b), name, seed, lab, a.cell(), mpi_cell,
                     s(ex) if ex is not None else "N/A", pol(a.policy) if a.threads * a.ranks > 1 else "–",
                     runs(a), f"{a.src}, {dname(a.dataset)} {a.train_n}"])
    return body


def table1_batches(present):
    """the batch sizes of the benchmarks (else of any sweep)"""
    batches = sorted({int(num(r["batch"])) for n in BENCHES for r in present.get(n, []) if num(r.get("batch"))})
    return batches or sorted({int(num(r["batch"])) for rs in present.values() for r in rs if num(r.get("batch"))})


def table1(d):
    """Table 1 with ours beside it; False when no benchmark or sweep is there at all"""
    i, cores = d.i, d.cores
    d.add("### Table 1 — time per epoch per configuration, with the MPI cost", "")
    present = {n: latest_config(r) for n, r in ((n, i.rows(n)) for n in SOURCES) if r}
    cuda_rows = [r for r in i.all_rows() if r.get("program") == "cuda"]
    batches = table1_batches(present)
    if not batches:
        for n in BENCHES:
            d.para(i.missing(n))
        d.shows([])
        return False
    T = min(S["threads"], cores)        # the report's threads / machines, capped at this machine's cores
    P = min(S["machines"], max(2, cores))
    facts, body = {}, []
    for b in batches:
        facts[b] = measure(d, present, cuda_rows, b, T, P)
        body += table1_rows(b, facts[b], T, P)
    d.table(["batch", "configuration (report)", "seed: epoch / MPI cost", "ours", "ours: epoch",
             "ours: in MPI calls", "ours: MPI cost", "OMP_WAIT_POLICY", "runs", "source"], body, "seed000-table1",
            keep=["batch", "configuration (report)", "seed: epoch / MPI cost", "ours", "ours: epoch", "ours: MPI cost",
                  "runs"])
    for n in BENCHES:
        if n not in present:
            d.add(f"- {i.missing(n)}")
    d.add("")
    table1_note(d, facts, T, P)
    d.shows(table1_sentences(d, facts, batches))
    return True


def table1_note(d, facts, T, P):
    cores, n = d.cores, S["images_per_machine"]
    datasets = sorted({dname(a.dataset) for f in facts.values() for a in f.values() if isinstance(a, Agg)})
    d.para(f"The report: MNIST, {n:,} images per machine (the MPI rows: {S['machines']} machines × {n:,}; the "
           f"others: one machine × {n:,}), so its MPI cost is the time the MPI version adds for the same work per "
           f"machine. Ours: {'/'.join(datasets)}, "
           f"the whole training set split over the ranks (strong scaling) on "
           f"{cores} cores, so \"{S['threads']} threads\" and \"{S['machines']} machines\" become {T} threads and "
           f"{P} ranks. "
           f"*In MPI calls* (a column of the CSV) is `comm_seconds` (seconds inside MPI per epoch, mean over ranks); "
           f"*MPI cost* "
           f"is the report's definition for our setup: our epoch minus the non-MPI configuration's epoch "
           f"scaled to the cores the MPI run adds (serial / {min(P, cores)} for {P} ranks; hybrid 1×{T} × "
           f"{min(T, cores)}/{min(P * T, cores)} for {P}×{T}).")


def table1_sentences(d, facts, batches):
    n = S["images_per_machine"]
    naive_t, _ = seed000_row("naive")
    sent = []
    f64 = facts.get(64) or facts[batches[0]]
    b0 = 64 if 64 in facts else batches[0]
    if f64["naive"]:
        scaled = f64["naive"].epoch * n / float(f64["naive"].train_n or 60000)
        sent.append(f"Scaled to the report's {n:,} images, our serial epoch at batch {b0} takes {s(scaled)} "
                    f"against its naive {g(naive_t)} ({naive_t / scaled:.0f}× less; a different machine and network).")
    for b in batches:
        sent.append(mpi_sentence(b, facts[b]))
    sent.append(next((t for t in (omp_sentence(d, b, facts[b]) for b in batches) if t), None))
    sent.append(next((t for t in (hybrid_sentence(d, b, facts[b]) for b in batches) if t), None))
    if len(batches) > 1 and all(facts[b]["mpi"] for b in batches[:2]):
        c1, c2 = facts[batches[0]]["mpi"].comm, facts[batches[1]]["mpi"].comm
        if c1 is not None and c2 is not None:
            sent.append(f"Going from batch {batches[0]} to {batches[1]} {'cuts' if c2 < c1 else 'raises'} the time "
                        f"in MPI calls from {s(c1)} to {s(c2)} per epoch ({int(batches[1] / batches[0])}× fewer "
                        f"gradient exchanges).")
    sent.append(gpu_sentence(facts, batches))
    return sent


def mpi_sentence(b, f):
    if not (f["mpi"] and f["ser_same"]):
        return None
    rep_t, rep_c = seed000_row("naive_mpi")
    rep_share = 100 * rep_c / rep_t
    m, sp = f["mpi"], ratio(f["ser_same"].epoch, f["mpi"].epoch)
    share = m.comm_share
    cmp = ("a larger share than" if share is not None and share > rep_share else "a smaller share than")
    return (f"At batch {b}, {m.ranks} MPI ranks give {x(sp)} over serial ({s(m.epoch)} vs "
            f"{s(f['ser_same'].epoch)}, {m.src}); {s(m.comm)} of the epoch is spent in MPI calls "
            f"({pct(share, 1)}), {cmp} the report's {g(rep_c)} of {g(rep_t)} ({pct(rep_share, 1)}); the epoch is "
            f"{s(f['ex_mpi'])} {'longer' if (f['ex_mpi'] or 0) >= 0 else 'shorter'} than a perfect "
            f"split of serial's.")


def omp_sentence(d, b, f):
    if not (f["omp"] and f["ser_omp"]):
        return None
    rep_omp, rep_naive = seed000_row("omp")[0], seed000_row("naive")[0]
    rep_sp = rep_naive / rep_omp
    sp = ratio(f["ser_omp"].epoch, f["omp"].epoch)
    return (f"OpenMP with {f['omp'].threads} threads ({f['omp'].variant}) is {x(sp)} serial at batch "
            f"{b} ({'more' if sp and sp > rep_sp else 'less'} than the report's {g(rep_omp)} vs {g(rep_naive)} = "
            f"{x(rep_sp)} with {S['threads']} threads"
            f"{'' if d.cores >= S['threads'] else f'; this machine has {d.cores} cores'}).")


def hybrid_sentence(d, b, f):
    if not (f["hyb"] and f["ex_hyb"] is not None):
        return None
    h = f["hyb"]
    over = h.ranks * h.threads > d.cores
    return (f"Hybrid {h.cfg()} at batch {b}{' (oversubscribed, ' + pol(h.policy) + ')' if over else ''}"
            f" takes {s(h.epoch)}, {s(abs(f['ex_hyb']))} "
            f"{'more' if f['ex_hyb'] >= 0 else 'less'} than OpenMP alone on the same cores.")


def gpu_sentence(facts, batches):
    rep_t, _ = seed000_row("cuda")
    n = S["images_per_machine"]
    gb = next((b for b in batches if facts[b]["cu1"]), None)
    if gb is None:
        return (f"The CUDA rows are empty: no GPU measurement is in this run, so the report's {g(rep_t)} CUDA "
                "epoch has no counterpart here.")
    a = facts[gb]["cu1"]
    scaled = a.epoch * n / float(a.train_n or 60000)
    return (f"On the GPU, cuda {flags('cuda', a.variant)} takes {s(a.epoch)} per epoch at batch {gb}, "
            f"{s(scaled)} scaled to {n:,} images: {'faster' if scaled < rep_t else 'slower'} than the "
            f"report's {g(rep_t)}.")


# ---------------------------------------------------------------- Figure 6


def figure6(d):
    i = d.i
    d.add("### Figure 6 — time per epoch vs OpenMP threads", "")
    d.add(i.figure("openmp-threads.png", "openmp/openmp: epoch time and speedup vs threads"), "")
    rows = latest_config(i.rows("openmp.csv"))
    if rows is None:
        d.para(i.missing("openmp.csv"))
        return
    b = max({r["batch"] for r in rows if r.get("program") == "openmp"} or {""},
            key=lambda bb: len(select(rows, program="openmp", batch=bb)))
    ser = serial_of(rows, b)
    ts = sorted({int(r["threads"]) for r in select(rows, program="openmp", batch=b)})
    body, curve = [], {}
    for t in ts:
        cells, pols, ns, dist, tot = [], set(), set(), 0, 0
        for m in modes_of(rows):
            a = agg(rows, "openmp.csv", program="openmp", variant=m, threads=t, batch=b)
            if a:
                curve.setdefault(m, {})[t] = a.epoch
                pols.add(pol(a.policy))
                ns.add(a.n)
                dist, tot = dist + a.disturbed, tot + a.n
                cells.append(f"{a.cell()}, {speedup(ser, a)}")
            else:
                cells.append("not run")
        body.append([str(t), ",".join(sorted(pols))] + cells
                    + [",".join(str(n) for n in sorted(ns)) + (f" ({dist} of {tot} disturbed)" if dist else "")])
    head = ["threads", "OMP_WAIT_POLICY"] + [f"{flags('openmp', m)}" for m in modes_of(rows)] + ["runs"]
    # the policy column gives way to the modes (it is in the CSV, and per figure in "Which timing is which")
    d.table(head, body, "seed000-figure6", keep=None if len(head) <= 7 else
            ["threads"] + head[2:-1][:5] + ["runs"])
    r0 = select(rows, program="openmp")[0] if select(rows, program="openmp") else {}
    rep_omp, rep_naive = seed000_row("omp")[0], seed000_row("naive")[0]
    peak = S["figure6_peak_threads"]
    d.para(f"Epoch time, speedup over serial/serial ({ser.cell() if ser else '–'} in the same sweep), "
           f"{r0.get('train_n', '?')} samples ({dname(r0.get('dataset'))}), batch {b}, {d.cores} cores. The report "
           f"published this figure without numbers: time fell from 1 to {peak} threads (little from {S['threads']} "
           f"to {peak}) and rose above {peak}; its Table 1 gives {g(rep_omp)} at {S['threads']} threads against "
           f"{g(rep_naive)} naive ({x(rep_naive / rep_omp)}).")
    d.shows(figure6_sentences(d, rows, b, ser, curve))


def figure6_sentences(d, rows, b, ser, curve):
    cores = d.cores
    sent, u_modes, mono = [], [], []
    for m in modes_of(rows):
        c = curve.get(m)
        if not c or len(c) < 2:
            continue
        tb, tmax, tmin = min(c, key=lambda t: c[t]), max(c), min(c)
        sp = ratio(ser.epoch, c[tb]) if ser else None
        clause = f"`{m}` is fastest at T = {tb} ({s(c[tb])}, {x(sp)} serial)"
        if tb == tmax:
            mono.append(m)
            clause += ", still improving at the largest count tried"
        else:
            clause += f" and {x(ratio(c[tmax], c[tb]))} slower at T = {tmax}"
            if c[tmin] > c[tb]:
                u_modes.append(m)
        if tb > cores and cores in c:
            nruns = min(a_.n for a_ in [agg(rows, program="openmp", variant=m, threads=tt, batch=b)
                                        for tt in (tb, cores)] if a_)
            clause += (f"; T = {tb} beats T = {cores} by {pct(100 * (c[cores] / c[tb] - 1), 1)}"
                       + (", within run-to-run noise" if c[cores] / c[tb] < 1.05 else
                          f" ({plural(nruns, 'run')} each)"))
        sent.append(clause + ".")
    if u_modes:
        which = (f"All {len(u_modes)} modes are" if len(u_modes) == len(curve) > 1 else
                 ", ".join(f"`{m}`" for m in u_modes) + (" is" if len(u_modes) == 1 else " are"))
        sent.append(f"{which} U-shaped like the report's figure, with the bottom at "
                    f"{'/'.join(str(min(curve[m], key=lambda t: curve[m][t])) for m in u_modes)} threads on "
                    f"the sweep's {cores} cores instead of the report's {S['figure6_peak_threads']}.")
    elif mono:
        sent.append("No mode is U-shaped here yet: more threads kept helping up to the largest count tried.")
    return sent


# ---------------------------------------------------------------- Figures 4-5


def latest_curves(rows):
    """the newest row of each (dataset, program, variant, train_n, batch)"""
    latest = {}
    for r in rows:
        k = (r.get("dataset"), r.get("program"), r.get("variant"), r.get("train_n"), r.get("batch"))
        if k not in latest or r.get("timestamp", "") >= latest[k].get("timestamp", ""):
            latest[k] = r
    return latest


def curves(d):
    i = d.i
    d.add("### Figures 4–5 — loss and accuracy curves", "")
    d.add(i.figure("curves.png", "training loss and test accuracy per epoch"), "")
    rows = i.rows("runs.csv")
    if rows is None:
        d.para(i.missing("runs.csv"))
        return
    latest = latest_curves(rows)
    body, sent = [], []
    for k in sorted(latest):
        r = latest[k]
        accs = [num(v) for v in (r.get("test_acc_curve") or "").split(";") if num(v) is not None]
        bi = max(range(len(accs)), key=lambda j: accs[j]) if accs else None
        body.append([r["dataset"], f"{r['program']} {r['variant']}", r["batch"], r["epochs"], r["train_n"],
                     f"{num(r['final_train_loss']):.4f}" if num(r.get("final_train_loss")) is not None else "–",
                     pct(num(r.get("test_accuracy")), 2),
                     f"{pct(accs[bi], 2)} (epoch {bi + 1})" if accs else "–"])
        if accs:
            sent.append(f"{r['program']} reaches {pct(num(r['test_accuracy']), 2)} test accuracy on "
                        f"{r['dataset']} after {r['epochs']} epochs (best {pct(accs[bi], 2)} at epoch {bi + 1}"
                        f"{', still rising' if bi == len(accs) - 1 else ''}).")
    d.table(["data", "program", "batch", "epochs", "samples", "final loss", "test accuracy", "best test accuracy"],
            body, "seed000-curves", keep=["data", "program", "batch", "epochs", "final loss", "test accuracy",
                                          "best test accuracy"])
    d.para(f"The report: {S['acc_baseline']}% for its unoptimized model on the whole MNIST set (baseline), "
           f"{S['acc_quarter']}% for one machine on a quarter of it and {S['acc_mpi']}% with MPI after "
           f"{S['epochs']} epochs — its MPI gain came from each machine seeing the other quarters' gradients, i.e. "
           "from more data.")
    sent += curves_sentences(d, latest)
    d.shows(sent)


def curves_sentences(d, latest):
    sent, base = [], S["acc_baseline"]
    mnist = [r for r in latest.values() if r.get("dataset") == "mnist" and num(r.get("test_accuracy"))]
    if mnist:
        a = num(mnist[0]["test_accuracy"])
        sent.append(f"On the MNIST digits that is {abs(a - base):.1f} points {'above' if a >= base else 'below'}"
                    f" the report's {base}% baseline, after {mnist[0]['epochs']} instead of {S['epochs']} epochs on "
                    f"{int(num(mnist[0]['train_n'])):,} images.")
    bm = latest_config(d.i.rows("bench-mpi.csv"))
    for b in sorted({r["batch"] for r in bm or []}, key=lambda v: int(num(v) or 0))[:1]:
        ser, m2 = serial_of(bm, b), agg(bm, program="mpi", ranks=2, variant=MPI_VARIANT, batch=b)
        if ser and m2 and ser.acc is not None and m2.acc is not None:
            diff = m2.acc - ser.acc
            sent.append(f"With our global-batch semantics 2 MPI ranks end at {pct(m2.acc, 2)} vs serial's "
                        f"{pct(ser.acc, 2)} after the same {ser.epochs} epochs at batch {b} ({diff:+.2f} points, "
                        f"bench-mpi.csv): "
                        f"{'distribution itself changes nothing, unlike in the report' if abs(diff) <= 0.2 else 'a difference larger than rounding explains'}.")
    return sent
