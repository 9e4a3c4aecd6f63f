#!/usr/bin/env python3
"""
scripts/model.py — a textbook alpha-beta model of the data-parallel trainers' gradient
exchange (Thakur, Rabenseifner & Gropp, IJHPCA 2005; docs/model.md), fitted to bench/comm's
rows at P = 2 only, checked against the held-out rows at P >= 3, and projected to clusters.

A message of b bytes over a link costs alpha + b * beta (the reduction's gamma folded into
beta: the fit cannot separate them). Every algorithm is a list of steps, each one message:
  ring                 2(P-1) steps of m/P bytes
  recursive doubling   ceil(log2 P) steps of m
  Rabenseifner         reduce-scatter by recursive halving (m/2, m/4, ... m/2^L) + allgather
                       by recursive doubling (the same sizes), L = ceil(log2 P)
  reduce+bcast         binomial trees: ceil(log2 P) steps of m, twice
  hierarchical         reduce+bcast among a node's k ranks (shared memory) + the best of
                       the above among the N node leaders
A node's k ranks share its link: a step in which all k send off the node (recursive doubling,
Rabenseifner past distance k) charges k x its bytes to the link; a ring or tree step sends
one message per node. Ranks sit on nodes in blocks; steps within a node use the shared-
memory alpha, beta. At most two regimes per transport (eager / rendezvous), alpha >= 0.

Commands (one line on stderr and exit 2 on bad input, naming the file and row):
  project   the exchange of --bytes at --nodes for --alpha-us, --gbit (first principles),
            the hierarchical and flat exchanges at --ranks-per-node, the global batch that
            keeps --efficiency, and the sentences saying which algorithm wins (computed
            from the same table); --outdir writes the .dat files of plots/model.gp
  validate  fit on the --comm CSV's P = 2 rows, predict every P >= 3 row, print the table
            (measured median of the repeats, their spread, prediction, error, verdict)
"""

import argparse
import csv
import math
import os
import statistics
import sys

CRITERION = 0.20          # a prediction within 20 % of the measurement is a hit
OPS = ("allreduce", "reduce-bcast", "hierarchical", "iallreduce")
COMM_NEED = ("transport", "op", "ranks", "nodes", "ranks_per_node", "bytes", "avg_us")
ISSUE_NODES = (16, 128, 1024)


class BadInput(Exception):
    """one line naming the file and row"""


# ---------------------------------------------------------------------------
# links: alpha, beta per regime

class Link:
    """alpha (s) and beta (s/byte) below and from a split size (the eager / rendezvous switch)"""

    def __init__(self, regimes, name=""):
        self.regimes = regimes    # [(from_bytes, alpha, beta)], ascending from 0
        self.name = name

    @classmethod
    def simple(cls, alpha_s, bytes_per_s, name=""):
        return cls([(0, alpha_s, 1.0 / bytes_per_s)], name)

    def ab(self, nbytes):
        a, b = self.regimes[0][1:]
        for lo, ra, rb in self.regimes:
            if nbytes >= lo:
                a, b = ra, rb
        return a, b

    def cost(self, nbytes, share=1):
        """one step of nbytes per rank, `share` ranks of a node sending through the link at once"""
        a, b = self.ab(nbytes)
        return a + nbytes * share * b


def log2c(p):
    return max(0, math.ceil(math.log2(p))) if p > 1 else 0


# ---------------------------------------------------------------------------
# the algorithms (Thakur, Rabenseifner & Gropp 2005), step by step

def ring(p, m, link):
    return 2 * (p - 1) * link.cost(m / p) if p > 1 else 0.0


def recursive_doubling(p, m, link):
    return log2c(p) * link.cost(m)


def rabenseifner(p, m, link):
    return 2 * sum(link.cost(m / 2 ** i) for i in range(1, log2c(p) + 1))


def reduce_bcast(p, m, link):
    return 2 * log2c(p) * link.cost(m)


FLAT = {"ring": ring, "recursive doubling": recursive_doubling, "Rabenseifner": rabenseifner,
        "reduce+bcast": reduce_bcast}


def best_flat(p, m, link):
    """(seconds, name) of the fastest allreduce algorithm (reduce+bcast is never one: 2x rd)"""
    return min((FLAT[n](p, m, link), n) for n in ("ring", "recursive doubling", "Rabenseifner"))


def placed(name, nodes, k, m, net, shm):
    """one algorithm over nodes x k ranks placed in blocks: the steps within a node on shm,
    the others on net; a step where every rank of a node sends off it shares the link k ways"""
    if nodes == 1:
        return FLAT[name](k, m, shm)
    lk, ln = log2c(k), log2c(nodes)
    if name == "recursive doubling":
        return lk * shm.cost(m) + ln * net.cost(m, share=k)
    if name == "Rabenseifner":
        inner = sum(shm.cost(m / 2 ** i) for i in range(1, lk + 1))
        outer = sum(net.cost(m / 2 ** i, share=k) for i in range(lk + 1, lk + ln + 1))
        return 2 * (inner + outer)
    if name == "ring":   # each step waits for its off-node message, one per node
        return 2 * (nodes * k - 1) * net.cost(m / (nodes * k))
    return reduce_bcast(k, m, shm) + reduce_bcast(nodes, m, net)   # trees: one off-node sender


def hierarchical(nodes, k, m, net, shm):
    """(seconds, inter-node algorithm): reduce+bcast within each node, the best among leaders"""
    t, name = best_flat(nodes, m, net)
    return reduce_bcast(k, m, shm) + t, name


# ---------------------------------------------------------------------------
# inputs

def number(text, path, row, col, lo=0.0, hi=1e12):
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise BadInput(f"{path}: row {row}: {col} '{text}' is not a number")
    if not (lo <= v <= hi) or math.isnan(v):
        raise BadInput(f"{path}: row {row}: {col} {text} is outside {lo:g} .. {hi:g}")
    return v


def read_comm(path):
    """bench/comm's rows: [{transport, op, ranks, nodes, k, bytes, avg (s)}]"""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
            head = rows and list(rows[0].keys()) or []
    except OSError as e:
        raise BadInput(f"{path}: cannot be read ({e.strerror})")
    missing = [c for c in COMM_NEED if c not in head]
    if not rows or missing:
        raise BadInput(f"{path}: not bench/comm's CSV (no rows, or missing {', '.join(missing)})")
    out = []
    for i, r in enumerate(rows, start=2):
        if r["op"] not in OPS:
            continue
        out.append({"transport": r["transport"], "op": r["op"],
                    "ranks": int(number(r["ranks"], path, i, "ranks", 1, 1e6)),
                    "nodes": int(number(r["nodes"], path, i, "nodes", 1, 1e6)),
                    "k": int(number(r["ranks_per_node"], path, i, "ranks_per_node", 1, 1e6)),
                    "bytes": int(number(r["bytes"], path, i, "bytes", 1, 1 << 40)),
                    "avg": number(r["avg_us"], path, i, "avg_us", 1e-6, 1e9) * 1e-6})
    return out


def sample_seconds(path):
    """the trainers' measured time per training sample: serial's epoch / its samples (the
    median over serial/serial's rows at their largest batch): the epoch as measured"""
    try:
        with open(path, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("program") == "serial"]
    except OSError as e:
        raise BadInput(f"{path}: cannot be read ({e.strerror})")
    if not rows:
        raise BadInput(f"{path}: no serial/serial row (program serial)")
    pts = [(number(r.get("batch"), path, i, "batch", 1, 1e9),
            number(r.get("epoch_seconds_median"), path, i, "epoch_seconds_median", 1e-9, 1e7)
            / number(r.get("train_n"), path, i, "train_n", 1, 1e12)) for i, r in enumerate(rows, start=2)]
    top = max(b for b, _ in pts)
    return statistics.median(s for b, s in pts if b == top)


# ---------------------------------------------------------------------------
# the fit: P = 2 rows, per transport and op, at most two regimes, alpha >= 0

def fit_line(pts):
    """alpha, beta minimising the relative squared residuals, alpha >= 0; (alpha, beta, sse)"""
    w = [(m, t, 1.0 / (t * t)) for m, t in pts]
    s0 = sum(c for _, _, c in w); s1 = sum(c * m for m, _, c in w); s2 = sum(c * m * m for m, _, c in w)
    y0 = sum(c * t for _, t, c in w); y1 = sum(c * m * t for m, t, c in w)
    det = s0 * s2 - s1 * s1
    a, b = ((y0 * s2 - s1 * y1) / det, (s0 * y1 - s1 * y0) / det) if det > 0 else (0.0, y1 / s2)
    if a < 0 or b < 0:
        cands = [(0.0, max(y1 / s2, 0.0)), (max(y0 / s0, 0.0), 0.0)]
        a, b = min(cands, key=lambda ab: sum(((ab[0] + ab[1] * m) / t - 1) ** 2 for m, t in pts))
    return a, b, sum(((a + b * m) / t - 1) ** 2 for m, t in pts)


def fit_link(pts, name):
    """one line, or two (split where it halves the residuals; >= 3 sizes each side)"""
    pts = sorted(pts)
    a, b, sse = fit_line(pts)
    best = (sse, [(0, a, b)])
    if sse <= 1e-4 * len(pts):   # one line within 1 % rms: no second regime
        return Link(best[1], name)
    for s in range(3, len(pts) - 2):
        a1, b1, e1 = fit_line(pts[:s])
        a2, b2, e2 = fit_line(pts[s:])
        if e1 + e2 < 0.5 * sse and e1 + e2 < best[0]:
            best = (e1 + e2, [(0, a1, b1), (pts[s][0], a2, b2)])
    return Link(best[1], name)


# the steps each op's P = 2 row is made of: it costs steps x (alpha + m beta)
STEPS_AT_2 = {"allreduce": 1, "iallreduce": 1, "reduce-bcast": 2}


def fit(rows, fit_ranks=2):
    """{(transport, op): Link} from the rows at P = fit_ranks (medians over repeats)"""
    groups = {}
    for r in rows:
        if r["ranks"] == fit_ranks:
            groups.setdefault((r["transport"], r["op"], r["nodes"]), {}).setdefault(r["bytes"], []).append(r["avg"])
    links = {}
    for (tr, op, nodes), by in groups.items():
        steps = 2 if op == "hierarchical" and nodes == 1 else STEPS_AT_2.get(op, 1)
        pts = [(m, statistics.median(ts) / steps) for m, ts in by.items()]
        if len(pts) >= 2:
            links[(tr, op)] = fit_link(pts, f"{tr} {op}")
    return links


def predict(links, r, shm_transport="shm"):
    """the model's seconds for row r (its op, P, nodes, ranks per node), or None"""
    net = links.get((r["transport"], r["op"]))
    if net is None:
        return None
    shm = links.get((shm_transport, r["op"]), net) if r["nodes"] > 1 else net
    n, k, m, p = r["nodes"], r["k"], r["bytes"], r["ranks"]
    if n > 1 and n * k != p:
        k = math.ceil(p / n)
    if r["op"] == "reduce-bcast":
        return placed("reduce+bcast", n, k, m, net, shm)
    if r["op"] == "hierarchical":
        return hierarchical(n, k, m, net, shm)[0] if n > 1 else reduce_bcast(p, m, net)
    return min(placed(a, n, k, m, net, shm) for a in ("ring", "recursive doubling", "Rabenseifner"))


def validate(rows, criterion=CRITERION, fit_ranks=2):
    """the table: per held-out (transport, op, P, nodes, bytes) at P > fit_ranks"""
    links = fit(rows, fit_ranks)
    held = {}
    for r in rows:
        if r["ranks"] > fit_ranks:
            key = (r["transport"], r["op"], r["ranks"], r["nodes"], r["bytes"])
            held.setdefault(key, {"row": r, "t": []})["t"].append(r["avg"])
    table = []
    for key in sorted(held):
        r, ts = held[key]["row"], held[key]["t"]
        pred = predict(links, r)
        if pred is None:
            continue
        meas = statistics.median(ts)
        spread = max(ts) / min(ts) - 1
        err = pred / meas - 1
        verdict = "spread" if spread > criterion else "hit" if abs(err) <= criterion else "miss"
        table.append({"transport": key[0], "op": key[1], "ranks": key[2], "nodes": key[3], "bytes": key[4],
                      "runs": len(ts), "measured": meas, "spread": spread, "predicted": pred, "error": err,
                      "verdict": verdict})
    apart = sorted({(r["transport"], r["op"]) for r in rows if r["ranks"] == 1})
    return links, table, apart


def summary(table):
    """per transport: held-out rows, hits, misses, spread rows, max |error| of the judged"""
    out = {}
    for t in table:
        s = out.setdefault(t["transport"], {"rows": 0, "hit": 0, "miss": 0, "spread": 0, "max_err": 0.0})
        s["rows"] += 1
        s[t["verdict"]] += 1
        if t["verdict"] != "spread":
            s["max_err"] = max(s["max_err"], abs(t["error"]))
    return out


# ---------------------------------------------------------------------------
# the projection

def projection(alpha_s, bytes_per_s, m, nodes, k, shm, sample_s=None, efficiency=0.8):
    """rows per node count: the four algorithms among N leaders (one rank per node, the whole
    link), the hierarchical and best flat exchange of N x k ranks, and the global batch
    keeping `efficiency` = compute / (compute + exchange), compute = (B / N) x sample_s / k (a
    node's k cores at the per-core rate): against the faster exchange of N x k ranks, and
    against the leaders' exchange alone (the in-node stage left out)"""
    net = Link.simple(alpha_s, bytes_per_s, "network")
    rows = []
    for n in nodes:
        row = {"nodes": n}
        for name, fn in FLAT.items():
            row[name] = fn(n, m, net)
        row["hierarchical"], row["inter"] = hierarchical(n, k, m, net, shm)
        row["flat"], row["flat_algo"] = min((placed(a, n, k, m, net, shm), a)
                                            for a in ("ring", "recursive doubling", "Rabenseifner"))
        x, lead = min(row["hierarchical"], row["flat"]), best_flat(n, m, net)[0]
        keep = efficiency / (1 - efficiency) * n * k / sample_s if sample_s else None
        row["batch"], row["batch_leaders"] = (keep * x, keep * lead) if keep else (None, None)
        rows.append(row)
    return rows


def statements(rows):
    """the "X wins where" sentences, each computed from the projection rows"""
    algos = ("ring", "recursive doubling", "Rabenseifner")
    winners = {}
    for r in rows:
        winners.setdefault(min(algos, key=lambda a: r[a]), []).append(r["nodes"])
    out = []
    for a, ns in winners.items():
        out.append(f"Among one rank per node, {a} is the fastest allreduce at {words(ns)} nodes.")
    ratio = [r["reduce+bcast"] / r["recursive doubling"] for r in rows]
    span = f"{min(ratio):.2f}x" if f"{min(ratio):.2f}" == f"{max(ratio):.2f}" else f"{min(ratio):.2f}-{max(ratio):.2f}x"
    out.append(f"Reduce+bcast never wins: it costs {span} recursive doubling "
               "(twice its steps, each of the whole message).")
    h = [r["nodes"] for r in rows if r["hierarchical"] < r["flat"]]
    f = [r["nodes"] for r in rows if r["hierarchical"] >= r["flat"]]
    if h:
        out.append(f"With the node's ranks sharing its link, the hierarchical exchange beats the best flat one at "
                   f"{words(h)} nodes.")
    if f:
        out.append(f"The best flat exchange (link shared) beats the hierarchical one at {words(f)} nodes.")
    return out


def words(ns):
    ns = [f"{n:,}" for n in ns]
    return ns[0] if len(ns) == 1 else ", ".join(ns[:-1]) + " and " + ns[-1]


# ---------------------------------------------------------------------------
# the command line

def project_cmd(a):
    shm = Link.simple(a.shm_alpha_us * 1e-6, a.shm_gbs * 1e9, "shm (stated)")
    if a.comm:
        links = fit(read_comm(a.comm))
        shm = links.get(("shm", "reduce-bcast"), shm)
    sample = a.sample_us * 1e-6 if a.sample_us else sample_seconds(a.runs) if a.runs else None
    rows = projection(a.alpha_us * 1e-6, a.gbit * 1e9 / 8, a.bytes, a.nodes, a.ranks_per_node, shm, sample,
                      a.efficiency)
    print(f"# one exchange of {a.bytes:,} bytes, alpha {a.alpha_us:g} us, {a.gbit:g} Gbit/s; {a.ranks_per_node} ranks "
          f"per node, shared memory {shm.name}; compute {sample * 1e6:.3f} us per sample per core" if sample else
          f"# one exchange of {a.bytes:,} bytes, alpha {a.alpha_us:g} us, {a.gbit:g} Gbit/s; {a.ranks_per_node} ranks "
          f"per node, shared memory {shm.name}; no compute time (--sample-us or --runs) for the batch")
    e = round(100 * a.efficiency)
    print(f"nodes ring_us rd_us rabenseifner_us reduce_bcast_us hierarchical_us flat_us batch_{e} batch_{e}_leaders")
    for r in rows:
        print(f"{r['nodes']} {r['ring'] * 1e6:.1f} {r['recursive doubling'] * 1e6:.1f} {r['Rabenseifner'] * 1e6:.1f} "
              f"{r['reduce+bcast'] * 1e6:.1f} {r['hierarchical'] * 1e6:.1f} {r['flat'] * 1e6:.1f} "
              + (f"{r['batch']:.0f} {r['batch_leaders']:.0f}" if r["batch"] else "- -"))
    for s in statements(rows):
        print(s)
    if a.outdir:
        write_dats(a, shm, sample)


def write_dats(a, shm, sample):
    """model-projection.dat (nodes 1..1024: the exchanges, batch), model-sizes.dat (bytes:
    the exchanges among 16 nodes): plots/model.gp's inputs"""
    os.makedirs(a.outdir, exist_ok=True)
    ns = [2 ** i for i in range(0, 11)]
    rows = projection(a.alpha_us * 1e-6, a.gbit * 1e9 / 8, a.bytes, ns, a.ranks_per_node, shm, sample, a.efficiency)
    with open(os.path.join(a.outdir, "model-projection.dat"), "w") as f:
        f.write(f"# {a.bytes} bytes, {a.gbit:g} Gbit/s, alpha {a.alpha_us:g} us, {a.ranks_per_node} ranks per node\n"
                "# nodes ring_us rd_us rabenseifner_us reduce_bcast_us hierarchical_us flat_us batch\n")
        for r in rows:
            f.write(f"{r['nodes']} {r['ring'] * 1e6:.3f} {r['recursive doubling'] * 1e6:.3f} "
                    f"{r['Rabenseifner'] * 1e6:.3f} {r['reduce+bcast'] * 1e6:.3f} {r['hierarchical'] * 1e6:.3f} "
                    f"{r['flat'] * 1e6:.3f} {r['batch'] if r['batch'] else '-'}\n")
    net = Link.simple(a.alpha_us * 1e-6, a.gbit * 1e9 / 8)
    with open(os.path.join(a.outdir, "model-sizes.dat"), "w") as f:
        f.write("# 16 nodes, one rank each\n# bytes ring_us rd_us rabenseifner_us reduce_bcast_us\n")
        for e in range(2, 27):
            m = 2 ** e
            f.write(f"{m} " + " ".join(f"{FLAT[n](16, m, net) * 1e6:.3f}" for n in FLAT) + "\n")


def validate_cmd(a):
    rows = read_comm(a.comm)
    links, table, apart = validate(rows, a.criterion)
    print("# fit: P = 2 rows; alpha (us), beta (ns/byte) per regime")
    for (tr, op), l in sorted(links.items()):
        print(f"# {tr} {op}: " + "; ".join(f"from {lo} B: {al * 1e6:.2f} us, {be * 1e9:.4f} ns/B"
                                        for lo, al, be in l.regimes))
    print("transport op ranks nodes bytes runs measured_us spread predicted_us error verdict")
    for t in table:
        print(f"{t['transport']} {t['op']} {t['ranks']} {t['nodes']} {t['bytes']} {t['runs']} {t['measured'] * 1e6:.2f} "
              f"{t['spread']:.1%} {t['predicted'] * 1e6:.2f} {t['error']:+.1%} {t['verdict']}")
    for tr, s in sorted(summary(table).items()):
        worst = f"max |error| {s['max_err']:.1%}" if s["hit"] + s["miss"] else "none judged"
        print(f"{tr}: {s['rows']} held-out rows at P >= 3: {s['hit']} within {a.criterion:.0%}, {s['miss']} outside "
              f"({worst}), {s['spread']} whose repeats spread more than {a.criterion:.0%}")
    if apart:
        print("P = 1 rows (no exchange; not judged): " + ", ".join(f"{t} {o}" for t, o in apart))
    if a.runs:
        print(f"trainer runs {a.runs}: serial's measured epoch per sample {sample_seconds(a.runs) * 1e6:.3f} us "
              "(the projection's compute); the multi-rank trainer runs are not predicted here")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="scripts/model.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("project")
    p.add_argument("--alpha-us", type=float, default=2.0)
    p.add_argument("--gbit", type=float, default=100.0)
    p.add_argument("--bytes", type=int, default=940608)
    p.add_argument("--nodes", type=lambda s: [int(x) for x in s.split(",")], default=list(ISSUE_NODES))
    p.add_argument("--ranks-per-node", type=int, default=64)
    p.add_argument("--shm-alpha-us", type=float, default=0.5)
    p.add_argument("--shm-gbs", type=float, default=10.0)
    p.add_argument("--sample-us", type=float)
    p.add_argument("--efficiency", type=float, default=0.8)
    p.add_argument("--comm")
    p.add_argument("--runs")
    p.add_argument("--outdir")
    v = sub.add_parser("validate")
    v.add_argument("--comm", required=True)
    v.add_argument("--criterion", type=float, default=CRITERION)
    v.add_argument("--runs", help="the trainers' CSV: its per-sample time is printed (not yet validated)")
    a = ap.parse_args(argv)
    for name in ("alpha_us", "gbit", "shm_alpha_us", "shm_gbs", "sample_us", "efficiency", "criterion"):
        x = getattr(a, name, None)
        if x is not None and not (0 <= x < 1e9) or (name in ("gbit", "shm_gbs", "efficiency") and x is not None and x <= 0):
            print(f"model.py: --{name.replace('_', '-')} {x}: not a finite positive number", file=sys.stderr)
            return 2
    if a.cmd == "project" and (a.efficiency >= 1 or a.bytes < 1 or a.ranks_per_node < 1 or min(a.nodes) < 1):
        print("model.py: --efficiency must be below 1, --bytes, --ranks-per-node and --nodes positive", file=sys.stderr)
        return 2
    try:
        (project_cmd if a.cmd == "project" else validate_cmd)(a)
    except BadInput as e:
        print(f"model.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
