"""
scripts/reporting/pytorch.py — "What else would you use": partrain's trainers beside the
same network in PyTorch, measured in the same benchmark invocations.
"""

from reporting.common import (agg, best, by_number, label, latest_config, plural, pol, ratio, runs, s, select, speedup,
                              x)


def pytorch(d):
    i = d.i
    d.add("## What else would you use", "")
    d.para("PyTorch 1.13 (CPU, `bench/torch_mlp.py`) trains the same network on the same data, batch and "
           "thread count in the same benchmark invocation; ratio = partrain's epoch / PyTorch's (below 1: "
           "partrain is faster), with the range of the ratios within one benchmark round.")
    body, sent = [], []
    for name, what in (("bench-serial.csv", "MLP"), ("bench-openmp.csv", "MLP"), ("bench-cnn.csv", "CNN")):
        rows = latest_config(i.rows(name))
        if rows is None:
            d.para(i.missing(name))
            continue
        for b in by_number({r["batch"] for r in rows}):
            batch_rows(rows, name, what, b, body, sent)
    if body:
        d.table(["model", "batch", "program", "epoch", "PyTorch, same threads", "ratio (same threads)",
                 "ratio to PyTorch's best", "OMP_WAIT_POLICY", "runs (ours/torch)", "source"], body, "pytorch",
                keep=["model", "batch", "program", "epoch", "PyTorch, same threads", "ratio (same threads)",
                      "runs (ours/torch)"])
    d.shows(sent)


def batch_rows(rows, name, what, b, body, sent):
    """one batch size of one benchmark: our configurations and PyTorch's thread counts"""
    torch_rows = select(rows, program="pytorch")
    tor = {int(t): agg(rows, name, program="pytorch", threads=t, batch=b)
           for t in {r["threads"] for r in select(torch_rows, batch=b)}}
    tor = {t: a for t, a in tor.items() if a}
    if not tor:
        return
    tbest = min(tor.values(), key=lambda a: a.epoch)
    ours = [agg(rows, name, program=p, variant=v, ranks=r, threads=t, batch=b) for p, v, r, t in
            sorted({(r_["program"], r_["variant"], r_["ranks"], r_["threads"]) for r_ in
                    select(rows, batch=b) if r_["program"] != "pytorch"})]
    for a in [a for a in ours if a]:
        workers = a.ranks * a.threads
        same = tor.get(workers) or tor.get(min(tor, key=lambda t: abs(t - workers)))
        body.append([what, b, label(a), a.cell(),
                     f"{same.cell()}, {plural(same.threads, 'thread')}", speedup(a, same),
                     speedup(a, tbest), pol(a.policy) if workers > 1 else "–",
                     runs(a, same), name])
    for t in sorted(tor):
        body.append([what, b, label(tor[t]), tor[t].cell(), "–", "1.00×",
                     speedup(tor[t], tbest), pol(tor[t].policy) if t > 1 else "–",
                     runs(tor[t]), name])
    fastest = best([a for a in ours if a])
    if fastest:
        r_ = ratio(tbest.epoch, fastest.epoch)
        sent.append(f"{what}, batch {b} ({name}): partrain's fastest, {label(fastest)}, takes "
                    f"{s(fastest.epoch)} per epoch vs PyTorch's best {s(tbest.epoch)} "
                    f"({plural(tbest.threads, 'thread')}): "
                    + (f"{x(r_)} faster." if r_ >= 1 else f"PyTorch is {x(1 / r_)} faster."))
    tmax = max(tor, default=1)   # the benchmarks run PyTorch with 1 and C threads
    if 1 in tor and tmax > 1:
        r2 = ratio(tor[tmax].epoch, tor[1].epoch)
        sent.append(f"PyTorch's {what} with {tmax} threads takes {x(r2)} its 1-thread time"
                    f"{' (slower with more threads)' if r2 > 1 else ''}.")
