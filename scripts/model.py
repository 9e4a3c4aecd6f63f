#!/usr/bin/env python3
"""
scripts/model.py — an alpha-beta (Hockney) model of partrain's data-parallel training:
fitted to bench/comm's collective timings and the trainers' compute time, checked against
the measured runs, and projected to clusters of 1 ... 1024 nodes. Design: docs/model.md.

  model.py fit      [--comm CSV] [--runs CSV]
      alpha, beta per transport and op (results/comm.csv), with the fit's residuals; the
      compute time per step t(b) = a + c*b (serial rows of results/model-runs.csv)
  model.py validate [--comm CSV] [--runs CSV] [--beside CSV]
      every measured mpi/hybrid/openmp configuration of model-runs.csv: predicted and
      measured epoch and comm seconds, the error of each, the largest |error|; with
      --beside (default: comm-beside.csv next to --runs, when there), also error2: the
      prediction with each run's exchange scaled to what bench/comm measured just before
      that run (bench/model-runs.sh), which takes out how the machine drifted between
      the fit's measurements and the run
  model.py project  [--comm CSV] [--runs CSV] [--outdir DIR] [--cores-per-node C]
                    [--thread-eff E] [--gpu-samples-per-s R] [--alpha-us A] [--train-n N]
      the .dat files of plots/model.gp (DIR/model-*.dat, `#` headers) and a summary:
      epoch time, speedup and efficiency of mpi and hybrid for P = 1 ... 1024 nodes,
      global batch 64 ... 8192, links of 10/100/400 Gbit/s with latency A, and the
      global batch that keeps 80 % efficiency at each P

Inputs (read by column name; scripts/partrain.py):
  results/comm.csv       transport,op,ranks,nodes,ranks_per_node,bytes,iterations,min_us,
                         avg_us,max_us,timestamp,gap_us (bench/comm; a file without gap_us is
                         read as all OSU's way); alpha, beta fitted on max_us (the slowest rank,
                         which a training step waits for) of the OSU-style rows (gap_us empty),
                         the spacing factor from the back-to-back rows (gap_us set)
  results/model-runs.csv the trainers' rows (common/results.h) + other_load_cores,disturbed
                         + transport,nodes,ranks_per_node,physical_cores (bench/model-runs.sh)
Bad input (a missing file, a wrong header, no rows for a transport that is needed): one
line on stderr, exit 2, nothing written. Exit status otherwise 0: the validation prints
its errors and never fails on them (timings are not test verdicts).
Python 3 standard library only.
"""

import argparse
import datetime
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import partrain  # noqa: E402

PROG = "model.py"
COMM_HEADER = ["transport", "op", "ranks", "nodes", "ranks_per_node", "bytes", "iterations", "min_us",
               "avg_us", "max_us", "timestamp", "gap_us"]
COMM_HEADER_OLD = COMM_HEADER[:-1]   # before gap_us: every row OSU's way
RUN_EXTRA = ["transport", "nodes", "ranks_per_node", "physical_cores"]
RUN_NEED = ["program", "variant", "ranks", "threads", "image_size", "train_n", "hidden", "batch",
            "epoch_seconds_median", "comm_seconds"] + RUN_EXTRA
OPS = ("allreduce", "reduce-bcast", "hierarchical", "iallreduce", "barrier")
CLASSES = 10                 # output units of every partrain MLP (10 classes)
BACKWARD_SHARE = 2.0 / 3.0   # backward = 2 of the 3 GEMMs per layer: what overlap can hide behind
# projection defaults (stated in docs/model.md and the report)
LINKS_GBIT = (10, 100, 400)
ALPHA_IB_US, ALPHA_TCP_US = 2.0, 25.0
LOCAL_ALPHA_US, LOCAL_GBYTE_S = 0.5, 10.0    # intra-node shared memory when comm.csv has no shm rows
NODES = tuple(2 ** k for k in range(11))     # 1 ... 1024
BATCHES = tuple(2 ** k for k in range(6, 14))  # 64 ... 8192
TARGET_EFF = 0.8


class BadInput(Exception):
    """an input the model cannot use: one line, exit 2"""


# ---------------------------------------------------------------- closed forms
# alpha: seconds per message, beta: seconds per byte, m: bytes per rank, p: ranks.
# Each returns (A, B): the operation takes A*alpha + B*beta seconds.


def log2c(p):
    """ceil(log2 p): the rounds of a binomial tree"""
    return max(0, math.ceil(math.log2(p))) if p > 1 else 0


def rd_steps(p):
    """recursive doubling's exchanges: log2 p, 2 more when p is not a power of two (the
    extra ranks fold in before and out after)"""
    if p <= 1:
        return 0
    k = int(math.floor(math.log2(p)))
    return k if 2 ** k == p else k + 2


def ring(p, m):
    return (2.0 * (p - 1), 2.0 * (p - 1) / p * m) if p > 1 else (0.0, 0.0)


def recursive_doubling(p, m):
    s = rd_steps(p)
    return (float(s), s * float(m))


def reduce_bcast(p, m):
    k = log2c(p)
    return (2.0 * k, 2.0 * k * m)


def barrier(p, m=0):
    return (float(log2c(p)), 0.0)


ALLREDUCE_ALGOS = {"ring": ring, "recursive-doubling": recursive_doubling}


def cost(ab, alpha, beta):
    return ab[0] * alpha + ab[1] * beta


def allreduce_time(p, m, alpha, beta):
    """MPI_Allreduce as the library picks it: the faster of ring and recursive doubling"""
    return min(cost(f(p, m), alpha, beta) for f in ALLREDUCE_ALGOS.values())


def allreduce_algo(p, m, alpha, beta):
    return min(ALLREDUCE_ALGOS, key=lambda k: cost(ALLREDUCE_ALGOS[k](p, m), alpha, beta))


def hierarchical_time(nodes, per_node, m, net, local):
    """node-local binomial reduce + the leaders' allreduce + node-local binomial bcast;
    net, local: (alpha, beta) of the network and of shared memory"""
    loc = cost(reduce_bcast(per_node, m), *local)
    return loc + (allreduce_time(nodes, m, *net) if nodes > 1 else 0.0)


# ---------------------------------------------------------------- weighted least squares


def lsq(points, fix_beta_zero=False, free_alpha=False):
    """(alpha, beta, cost) minimising sum(((A a + B b) - t) / t)^2 over points (A, B, t),
    with alpha, beta >= 0; free_alpha: alpha may be negative as long as every point's
    prediction stays positive (a regime of large messages: a line over its sizes only)"""
    def solve(use_a, use_b):
        saa = sab = sbb = sat = sbt = 0.0
        for A, B, t in points:
            w = 1.0 / (t * t)
            saa += w * A * A; sab += w * A * B; sbb += w * B * B
            sat += w * A * t; sbt += w * B * t
        a = b = 0.0
        if use_a and use_b:
            det = saa * sbb - sab * sab
            if det <= 1e-300 * max(1.0, saa * sbb):
                return None
            a, b = (sat * sbb - sbt * sab) / det, (saa * sbt - sab * sat) / det
        elif use_a:
            if saa <= 0:
                return None
            a = sat / saa
        else:
            if sbb <= 0:
                return None
            b = sbt / sbb
        if b < 0 or (a < 0 and not (free_alpha and all(A * a + B * b > 0 for A, B, _ in points))):
            return None
        c = sum(((A * a + B * b) - t) ** 2 / (t * t) for A, B, t in points)
        return a, b, c
    cands = [solve(True, False)] if fix_beta_zero else [solve(True, True), solve(True, False), solve(False, True)]
    cands = [c for c in cands if c]
    return min(cands, key=lambda c: c[2]) if cands else (0.0, 0.0, float("inf"))


class Fit:
    """alpha, beta of one (transport, op): one regime, or up to MAX_REGIMES split at message
    sizes (the library changes protocol, e.g. eager to rendezvous, or a shaped link its
    behaviour: each range of sizes follows its own line), with the relative residuals of
    its rows"""

    def __init__(self, transport, op, regimes):
        # regimes: [(lowest bytes, alpha, beta, residuals, {algo: rows})], by lowest bytes
        self.transport, self.op, self.regimes = transport, op, regimes
        self.alpha, self.beta = regimes[-1][1], regimes[-1][2]     # large messages: the gradients
        self.resid = [r for reg in regimes for r in reg[3]]
        self.n = len(self.resid)
        self.algos = {}
        for reg in regimes:
            for k, v in reg[4].items():
                self.algos[k] = self.algos.get(k, 0) + v

    @property
    def split(self):
        """the smallest message of the large regime (None: one regime)"""
        return self.regimes[-1][0] if len(self.regimes) > 1 else None

    @property
    def latency(self):
        """alpha of the smallest messages"""
        return self.regimes[0][1]

    def ab(self, m):
        """(alpha, beta) for a message of m bytes"""
        for lo, a, b, *_ in reversed(self.regimes):
            if m >= lo:
                return a, b
        return self.regimes[0][1], self.regimes[0][2]

    @property
    def rms(self):
        return math.sqrt(sum(r * r for r in self.resid) / len(self.resid)) if self.resid else None

    @property
    def worst(self):
        return max((abs(r) for r in self.resid), default=None)


MIN_REGIME_SIZES = 3    # distinct message sizes each regime of a split fit needs
SPLIT_GAIN = 0.75       # one more regime only when it cuts the squared residuals by a quarter or more
MAX_REGIMES = 3         # eager, a link's burst, its rate: the shaped links show all three


def fit_regimes(transport, op, points, coef_fns, fix_beta_zero=False):
    """the Fit of points (see fit_points): one alpha, beta over all message sizes, or up
    to MAX_REGIMES lines over consecutive ranges of sizes, the library changing protocol
    between them (eager to rendezvous) or a shaped link its behaviour (a token bucket's
    burst, then its rate). Split greedily: a regime is cut at a measured size (each side
    MIN_REGIME_SIZES sizes or more) when that cuts the squared relative residuals of the
    whole fit by a quarter or more (SPLIT_GAIN). A line above the smallest sizes holds
    only over its own range: its alpha may be negative (on a token-bucket link a message's
    first burst leaves at the link's full speed, so large messages cost (m - burst) * beta:
    a line that meets the axis below zero)"""
    def ss(res):
        return sum(r * r for r in res)

    def fit_range(lo, pts):
        a, b, res, algos = fit_points(pts, coef_fns, fix_beta_zero, free_alpha=lo > 0)
        return (lo, a, b, res, algos, pts)

    regimes = [fit_range(0.0, points)]
    while not fix_beta_zero and len(regimes) < MAX_REGIMES:
        total = sum(ss(r[3]) for r in regimes)
        best = None
        for k, (lo, _, _, res, _, pts) in enumerate(regimes):
            sizes = sorted({pt[3] for pt in pts})
            for s in sizes[MIN_REGIME_SIZES:len(sizes) - MIN_REGIME_SIZES + 1]:
                left = fit_range(lo, [pt for pt in pts if pt[3] < s])
                right = fit_range(s, [pt for pt in pts if pt[3] >= s])
                c = total - ss(res) + ss(left[3]) + ss(right[3])
                if c <= SPLIT_GAIN * total and (best is None or c < best[0]):
                    best = (c, k, left, right)
        if best is None:
            break
        _, k, left, right = best
        regimes[k:k + 1] = [left, right]
    return Fit(transport, op, [r[:5] for r in regimes])


def fit_points(points, coef_fns, fix_beta_zero=False, free_alpha=False):
    """fit alpha, beta to points (p, nodes, per_node, m, t, offset) where the op costs
    offset + the fastest of coef_fns (each (p, nodes, per_node, m) -> (A, B)); the
    assignment of rows to algorithms is searched over the ratio alpha/beta (it decides
    which algorithm is faster for every row), so a model that holds exactly is recovered
    exactly. Returns (alpha, beta, residuals, {algo: rows})."""
    names = list(coef_fns)
    coefs = [{n: coef_fns[n](*pt[:4]) for n in names} for pt in points]

    def fit_assigned(assign):
        pts = [(coefs[i][assign[i]][0], coefs[i][assign[i]][1], pt[4] - pt[5]) for i, pt in enumerate(points)]
        if any(t <= 0 for _, _, t in pts):
            pts = [(A, B, max(t, 1e-12)) for A, B, t in pts]
        return lsq(pts, fix_beta_zero, free_alpha)

    def assign_for(alpha, beta):
        return tuple(min(names, key=lambda n: cost(c[n], alpha, beta)) for c in coefs)

    def model_cost(a, b):
        """the squared relative residuals of what the model predicts with (a, b): every row
        at its fastest algorithm, as the library picks (an assignment's own fit may claim
        a slower one: ring at P = 2 fits 2 alpha where recursive doubling predicts 1)"""
        return sum(((pt[5] + min(cost(coefs[i][n], a, b) for n in names)) / pt[4] - 1.0) ** 2
                   for i, pt in enumerate(points))

    tried, best = set(), None
    # candidate assignments: every algorithm alone, and the one each ratio alpha/beta implies
    starts = [tuple([n] * len(points)) for n in names]
    if len(names) > 1:
        starts += [assign_for(r, 1.0) for r in (10 ** (k / 8.0) for k in range(-16, 88))]
    for assign in starts:
        if assign in tried:
            continue
        tried.add(assign)
        for _ in range(20):      # then to the assignment its own fit implies
            a, b, c = fit_assigned(assign)
            if c != float("inf"):
                c = model_cost(a, b)
            if best is None or c < best[2] - 1e-15:
                best = (a, b, c, assign)
            nxt = assign_for(a, b) if len(names) > 1 else assign
            if nxt == assign or nxt in tried:
                break
            tried.add(nxt)
            assign = nxt
    a, b, _, assign = best
    resid, algos = [], {}
    for i, pt in enumerate(points):
        pred = pt[5] + min(cost(coefs[i][n], a, b) for n in names)
        resid.append(pred / pt[4] - 1.0)
        n = min(names, key=lambda n: cost(coefs[i][n], a, b))
        algos[n] = algos.get(n, 0) + 1
    return a, b, resid, algos


# ---------------------------------------------------------------- reading the inputs


def need_file(path, what, how):
    if not os.path.isfile(path):
        raise BadInput(f"{path}: missing ({what}; {how})")


def read_comm(path):
    """the rows of results/comm.csv, header checked exactly (today's, or the one before
    gap_us); gap: None for OSU's way, else the seconds of computation between two calls
    (bench/comm --gap-rows: a training step's, measured)"""
    need_file(path, "bench/comm's collective timings", "run bench/comm.sh")
    with open(path, newline="", errors="replace") as f:
        head = f.readline().strip().lstrip("\ufeff")
    if head.split(",") not in (COMM_HEADER, COMM_HEADER_OLD):
        raise BadInput(f"{path}: wrong header (want '{','.join(COMM_HEADER)}', got '{head[:80]}')")
    rows = partrain.read_csv(path, need=head.split(","), errors="replace")
    out = []
    for r in rows:
        # max_us, the slowest rank: a training step waits for it (reduce-bcast's ranks differ
        # by a whole transfer; allreduce's barely)
        p, t, m = partrain.num(r["ranks"]), partrain.num(r["max_us"]), partrain.num(r["bytes"])
        if p is None or t is None or m is None or p < 1 or t < 0 or m < 0 or r["op"] not in OPS:
            raise BadInput(f"{path}: line {r['_line']}: not a comm row (ranks '{r['ranks']}', op '{r['op']}', "
                           f"bytes '{r['bytes']}', max_us '{r['max_us']}')")
        n = int(partrain.num(r["nodes"]) or 1)
        per = int(partrain.num(r["ranks_per_node"]) or max(1, int(p) // max(1, n)))
        g = (r.get("gap_us") or "").strip()
        gap = partrain.num(g) if g else None
        if g and (gap is None or gap < 0):
            raise BadInput(f"{path}: line {r['_line']}: gap_us '{g}' is not a number of microseconds")
        out.append(dict(transport=r["transport"].strip(), op=r["op"], p=int(p), nodes=n, per_node=per,
                        m=m, t=t * 1e-6, ts=r["timestamp"].strip(), gap=None if gap is None else gap * 1e-6))
    if not out:
        raise BadInput(f"{path}: no rows")
    return out


def read_runs(path):
    """the rows of results/model-runs.csv (the trainers' schema + the four model columns)"""
    need_file(path, "the trainers' runs", "run bench/model-runs.sh")
    try:
        rows = partrain.read_csv(path, errors="replace")
        with open(path, newline="", errors="replace") as f:
            head = f.readline().strip().lstrip("\ufeff").split(",")
    except partrain.CSVError as e:
        raise BadInput(str(e)) from e
    missing = [c for c in RUN_NEED if c not in head]
    if missing:
        raise BadInput(f"{path}: wrong header (no column(s) {', '.join(missing)})")
    out = []
    for r in rows:
        vals = {c: partrain.num(r.get(c)) for c in ("ranks", "threads", "image_size", "train_n", "batch",
                                                   "epoch_seconds_median", "nodes", "ranks_per_node",
                                                   "physical_cores")}
        bad = [c for c, v in vals.items() if v is None or v < (0 if c == "epoch_seconds_median" else 1)]
        if bad:
            raise BadInput(f"{path}: line {r['_line']}: column(s) {', '.join(bad)} not usable")
        r["_v"] = vals
        out.append(r)
    if not out:
        raise BadInput(f"{path}: no rows")
    return out


def grad_bytes(image_size, hidden):
    """the bytes of one gradient (= the parameters): image_size^2 inputs, the hidden
    layers of the CSV's 'hidden' (e.g. 256x128), 10 outputs, float32"""
    try:
        sizes = [int(image_size) ** 2] + [int(h) for h in str(hidden).split("x") if h] + [CLASSES]
    except ValueError as e:
        raise BadInput(f"hidden '{hidden}': not a list of layer sizes like 256x128") from e
    return 4 * sum(a * b + b for a, b in zip(sizes, sizes[1:]))


# ---------------------------------------------------------------- the comm fits


class CommModel:
    """the fitted alpha, beta of every (transport, op) of comm.csv"""

    def __init__(self, rows, cores=None):
        """cores: the cores of the machine comm.csv was measured on; rows with more ranks
        time-share them (their collectives wait for descheduled ranks), which no cluster of
        one rank per core does: they are fitted only where a (transport, op) has too few
        other rows (self.shared counts those fits)"""
        self.fits = {}
        self.cores, self.shared = cores, []
        self.spacing_points = spacing_points(rows)
        by = {}
        for r in rows:
            if r.get("gap") is None:     # alpha, beta: OSU's way
                by.setdefault((r["transport"], r["op"]), []).append(r)
        self.transports = sorted({t for t, _ in by})
        # shm first: the node-local part of every hierarchical fit
        for (tr, op) in sorted(by, key=lambda k: (k[0] != "shm", k[1] == "hierarchical", k)):
            pts = [x for x in by[(tr, op)] if x["p"] > 1 and x["t"] > 0]
            if op != "barrier":
                pts = [x for x in pts if x["m"] > 0]
            need = 2 if op != "barrier" else 1
            own = [x for x in pts if cores is None or x["p"] <= cores]
            if len(own) >= need:
                pts = own
            elif cores is not None:
                self.shared.append((tr, op))
            if len(pts) < need:
                continue
            self.fits[(tr, op)] = self._fit(tr, op, pts)

    def local(self, m):
        """(alpha, beta) of shared memory for m bytes: the shm reduce-bcast (else allreduce)
        fit, else the stated default"""
        f = self.fits.get(("shm", "reduce-bcast")) or self.fits.get(("shm", "allreduce"))
        return f.ab(m) if f else (LOCAL_ALPHA_US * 1e-6, 1.0 / (LOCAL_GBYTE_S * 1e9))

    def _fit(self, tr, op, pts):
        if op in ("allreduce", "iallreduce"):
            fns = {n: (lambda p, nd, pn, m, f=f: f(p, m)) for n, f in ALLREDUCE_ALGOS.items()}
            P = [(x["p"], x["nodes"], x["per_node"], x["m"], x["t"], 0.0) for x in pts]
        elif op == "reduce-bcast":
            fns = {"binomial": lambda p, nd, pn, m: reduce_bcast(p, m)}
            P = [(x["p"], x["nodes"], x["per_node"], x["m"], x["t"], 0.0) for x in pts]
        elif op == "barrier":
            fns = {"dissemination": lambda p, nd, pn, m: barrier(p)}
            P = [(x["p"], x["nodes"], x["per_node"], 0.0, x["t"], 0.0) for x in pts]
        else:   # hierarchical: alpha, beta of the leaders' network, the node-local part from shm
            fns, P = {}, []
            for n, f in ALLREDUCE_ALGOS.items():
                fns[n] = (lambda p, nd, pn, m, f=f: f(nd, m) if nd > 1 else reduce_bcast(pn, m))
            for x in pts:
                off = (cost(reduce_bcast(x["per_node"], x["m"]), *self.local(x["m"]))
                       if tr != "shm" and x["nodes"] > 1 else 0.0)
                P.append((x["p"], x["nodes"], x["per_node"], x["m"], x["t"], off))
        return fit_regimes(tr, op, P, fns, fix_beta_zero=(op == "barrier"))

    def get(self, transport, op):
        """the fit used for OP on TRANSPORT: its own, else the transport's allreduce"""
        f = self.fits.get((transport, op)) or self.fits.get((transport, "allreduce"))
        if f is None:
            have = ", ".join(self.transports) or "none"
            raise BadInput(f"no comm rows for transport '{transport}' (op {op}; comm.csv has: {have}): "
                           f"run bench/comm.sh for it")
        return f

    def spacing(self, op, transport, p, nodes, m, gap):
        """how much longer (or shorter) OP takes when a training step of GAP seconds comes
        between the calls, as in a trainer, than OSU's way: interpolated linearly between
        the measured steps (constant beyond them) of the rows of this transport, op, P and
        nodes at m bytes (within 1 %); 1 where none were measured"""
        pts = [(g, k) for (tr, o, pp, nd, mm), gk in self.spacing_points.items()
               if (tr, o, pp, nd) == (transport, op, p, nodes) and abs(mm - m) <= 0.01 * m for g, k in gk]
        return interpolate(sorted(pts), gap) if pts else 1.0

    def sync_op(self, sync, program="mpi"):
        """the bench/comm op of a --sync exchange (hybrid: allreduce or reduce-bcast)"""
        if program == "hybrid":
            return "reduce-bcast" if sync == "reduce-bcast" else "allreduce"
        return {"overlap": "iallreduce"}.get(sync, sync)

    def sync_time(self, sync, transport, p, nodes, per_node, m):
        """seconds per step of one --sync exchange of m bytes over p ranks (overlap: the
        blocking allreduce; what it hides is applied by the caller)"""
        if p <= 1:
            return 0.0
        if sync == "reduce-bcast":
            f = self.get(transport, "reduce-bcast")
            return cost(reduce_bcast(p, m), *f.ab(m))
        if sync == "hierarchical":
            f = self.get(transport, "hierarchical")
            if f.op == "hierarchical":
                net = f.ab(m)
                loc = self.local(m) if transport != "shm" else net
                if nodes <= 1:
                    return cost(reduce_bcast(per_node, m), *net)
                return hierarchical_time(nodes, per_node, m, net, loc)
            return allreduce_time(p, m, *f.ab(m))
        # overlap: MPI_Iallreduce + wait, as bench/comm's iallreduce measures it (the
        # library's non-blocking algorithm, progressed inside MPI calls), else the allreduce
        f = self.get(transport, "iallreduce" if sync == "overlap" else "allreduce")
        return allreduce_time(p, m, *f.ab(m))


def spacing_points(rows):
    """{(transport, op, p, nodes, bytes): [(gap seconds, median ratio)]}: each back-to-back
    row's time over the OSU-style row of the same transport, op, P, nodes and size measured
    nearest to it in time (bench/comm.sh runs them one after the other), the median over
    the rows of each gap"""
    osu, ratios = {}, {}
    for r in rows:
        if r.get("gap") is None and r["t"] > 0:
            osu.setdefault((r["transport"], r["op"], r["p"], r["nodes"], r["m"]), []).append(r)
    for r in rows:
        key = (r["transport"], r["op"], r["p"], r["nodes"], r["m"])
        if r.get("gap") is None or key not in osu or r["op"] == "barrier":
            continue
        t0 = when(r["ts"])
        ref = min(osu[key], key=lambda o: abs((when(o["ts"]) - t0).total_seconds())
                  if t0 is not None and when(o["ts"]) is not None else float("inf"))
        ratios.setdefault(key, {}).setdefault(r["gap"], []).append(r["t"] / ref["t"])
    return {k: sorted((g, partrain.median(v)) for g, v in by_gap.items()) for k, by_gap in ratios.items()}


def interpolate(pts, x):
    """y at x on the polyline through the sorted (x, y) pts, constant beyond its ends"""
    if x <= pts[0][0]:
        return pts[0][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y1
    return pts[-1][1]


# ---------------------------------------------------------------- compute time


def share_of(ranks, threads, cores, other=0.0):
    """how many times slower a busy thread runs when ranks*threads (+ other load) share cores"""
    return max(1.0, (ranks * threads + other) / cores)


def steps_of(n, b):
    """(full steps, rows of the last partial step or 0)"""
    return n // b, n % b


def other_load(r):
    return partrain.num(r.get("other_load_cores")) or 0.0


class Compute:
    """t_step(b) = a + c*b on one core (serial rows, CPU sharing taken out), the thread
    efficiency of hybrid's T threads, and the overlap measured by the trainers"""

    def __init__(self, runs):
        ser = [r for r in runs if r["program"] == "serial"]
        if not ser:
            raise BadInput("model-runs.csv: no serial rows (the compute time per step comes from serial/serial at "
                           "several batches: bench/model-runs.sh)")
        # serial/serial's default --gemm (the kernel mpi/hybrid use) when the rows name several
        variants = {r["variant"] for r in ser}
        if len(variants) > 1:
            try:
                dflt = partrain.variant_names("serial")[0]
            except partrain.NotBuilt:
                dflt = None
            ser = [r for r in ser if r["variant"] == dflt] or ser
        pts, self.serial_points = [], []
        for key in sorted({(int(r["_v"]["batch"]), int(r["_v"]["train_n"])) for r in ser}):
            rs = [r for r in ser if (int(r["_v"]["batch"]), int(r["_v"]["train_n"])) == key]
            e = partrain.median(r["_v"]["epoch_seconds_median"] / share_of(1, 1, r["_v"]["physical_cores"],
                                                                          other_load(r)) for r in rs)
            b, n = key
            full, rem = steps_of(n, b)
            pts.append((full + (1 if rem else 0), n, e))
            self.serial_points.append((b, n, e, len(rs)))
        if len({p[0] for p in pts}) > 1:
            self.a, self.c, _ = lsq(pts)
            self.form = "a + c*b fitted to serial/serial at batches " + ", ".join(str(p[0]) for p in self.serial_points)
        else:
            self.a, self.c = 0.0, pts[0][2] / pts[0][1]
            self.form = f"c*b only: serial/serial was measured at one batch ({self.serial_points[0][0]})"
        self.per_sample = []     # off: the linear fit alone, for the residuals below
        self.resid = [(b, self.epoch_serial(n, b) / e - 1.0) for b, n, e, _ in self.serial_points]
        # then per-sample times of the measured batches (each epoch's steps solved for the
        # full-batch step, the remainder step taken from the linear fit)
        per = {}
        for b, n, e, _ in self.serial_points:
            full, rem = steps_of(n, b)
            t_full = (e - (self.a + self.c * rem if rem else 0.0)) / full if full else e
            per.setdefault(b, []).append(t_full / b)
        self.per_sample = sorted((b, partrain.median(v)) for b, v in per.items() if v)
        # thread efficiency per scheme, thread count T and batch b: openmp's rows, serial's
        # epoch at b / (T x openmp's), CPU sharing taken out. Scheme "reduction": hybrid's
        # threads (per-thread gradients); "owner": mpi --sync shm's ranks, which share a
        # node's model the way openmp --accum owner's threads do
        eff = {}
        for r in runs:
            if r["program"] == "openmp" and r["_v"]["threads"] > 1 and r["variant"] in ("reduction", "owner"):
                t, b = int(r["_v"]["threads"]), int(r["_v"]["batch"])
                e = r["_v"]["epoch_seconds_median"] / share_of(1, t, r["_v"]["physical_cores"], other_load(r))
                ideal = self.epoch_serial(int(r["_v"]["train_n"]), b) / t
                eff.setdefault(r["variant"], {}).setdefault(t, {}).setdefault(b, []).append(ideal / e)
        self.eff = {v: {t: sorted((b, partrain.median(x)) for b, x in bs.items()) for t, bs in ts.items()}
                    for v, ts in eff.items()}
        self.overlap_pairs = overlap_pairs(runs)
        self.hidden = partrain.median(h for *_, h in self.overlap_pairs) if self.overlap_pairs else 0.0

    def t_step(self, b):
        """one step of b samples on one core: the measured serial batches interpolated
        (per-sample time, linear in log b); outside them the fitted a + c*b, scaled to
        meet the nearest measured batch"""
        pts = self.per_sample
        if len(pts) < 2:
            return self.a + self.c * b
        if b <= pts[0][0]:
            b0, s0 = pts[0]
            lin0 = self.a + self.c * b0
            return b0 * s0 * (self.a + self.c * b) / lin0 if lin0 > 0 else b * s0
        if b >= pts[-1][0]:
            return b * pts[-1][1]
        for (b0, s0), (b1, s1) in zip(pts, pts[1:]):
            if b0 <= b <= b1:
                f = math.log(b / b0) / math.log(b1 / b0)
                return b * (s0 + f * (s1 - s0))
        return self.a + self.c * b

    def epoch_serial(self, n, b):
        full, rem = steps_of(n, b)
        return full * self.t_step(b) + (self.t_step(rem) if rem else 0.0)

    def thread_eff(self, t, default, b, scheme="reduction"):
        """(efficiency of T threads sharing a batch of b rows, where it comes from): openmp
        --accum SCHEME's measured batches interpolated in log b (the nearest one outside
        them)"""
        if t <= 1:
            return 1.0, "one thread"
        pts = self.eff.get(scheme, {}).get(t)
        if not pts:
            return default, f"stated --thread-eff {default:g} (no openmp {scheme} rows at T = {t})"
        src = f"openmp {scheme} rows at T = {t}"
        if b <= pts[0][0]:
            return pts[0][1], src
        if b >= pts[-1][0]:
            return pts[-1][1], src
        for (b0, e0), (b1, e1) in zip(pts, pts[1:]):
            if b0 <= b <= b1:
                return e0 + math.log(b / b0) / math.log(b1 / b0) * (e1 - e0), src
        return pts[-1][1], src


def overlap_pairs(runs):
    """(transport, ranks, batch, hidden fraction) for every mpi overlap configuration with
    an allreduce one beside it: 1 - comm(overlap)/comm(allreduce), clipped to [0, 1]"""
    def key(r):
        return (r["transport"], int(r["_v"]["ranks"]), int(r["_v"]["batch"]), int(r["_v"]["train_n"]))
    mpi = [r for r in runs if r["program"] == "mpi" and r["_v"]["ranks"] > 1]
    out = []
    for k in sorted({key(r) for r in mpi}):
        ov = partrain.median(partrain.num(r["comm_seconds"]) for r in mpi if key(r) == k and r["variant"] == "overlap")
        ar = partrain.median(partrain.num(r["comm_seconds"]) for r in mpi if key(r) == k and r["variant"] == "allreduce")
        if ov is not None and ar:
            out.append((k[0], k[1], k[2], min(1.0, max(0.0, 1.0 - ov / ar))))
    return out


# ---------------------------------------------------------------- predicting a run


def predict(cm, comp, program, sync, transport, ranks, threads, nodes, per_node, cores, batch, train_n, m,
            other=0.0, thread_eff=0.85, hidden=None, comm_scale=1.0):
    """(epoch seconds, comm seconds per epoch) of one configuration. The exchange is the
    fitted OSU-style time times the spacing factor at the step's computation (how the
    measured links and cores behave when a training step comes between the calls,
    bench/comm --gap-rows); comm_scale multiplies it too (validation's same-round variant:
    bench/comm measured beside the run)"""
    share = share_of(ranks, threads, cores, other)
    full, rem = steps_of(train_n, batch)

    def step(rows):
        per_rank = math.ceil(rows / ranks)
        if program == "mpi" and sync == "shm":
            # a node's ranks share one model in a window, forming slices' sums like openmp's
            # threads (--accum owner): the node's step is openmp's at T = its ranks,
            # whatever it loses to the ideal split counted as exchange; the node sums
            # are then allreduced among the nodes
            node_rows = math.ceil(rows / nodes)
            eff, _ = comp.thread_eff(per_node, thread_eff, node_rows, "owner")
            t_node = comp.t_step(node_rows) / (per_node * eff) * share
            t_comp = comp.t_step(per_rank) * share
            t_comm = max(0.0, t_node - t_comp)
            if nodes > 1:
                t_comm += (allreduce_time(nodes, m, *cm.get(transport, "allreduce").ab(m)) * comm_scale
                           * cm.spacing("allreduce", transport, nodes, nodes, m, t_node))
            return t_comp, t_comm
        eff, _ = comp.thread_eff(threads, thread_eff, per_rank)
        t_comp = comp.t_step(per_rank) / (threads * eff) * share
        t_comm = 0.0
        if ranks > 1:
            op = cm.sync_op(sync, program)
            t_comm = (cm.sync_time(sync if program == "mpi" else op, transport, ranks, nodes, per_node, m)
                      * comm_scale * cm.spacing(op, transport, ranks, nodes, m, t_comp))
        if sync == "overlap":
            h = comp.hidden if hidden is None else hidden
            t_comm -= min(h * t_comm, BACKWARD_SHARE * t_comp)
        return t_comp, t_comm

    tc, tm = step(batch)
    epoch, comm = full * (tc + tm), full * tm
    if rem:
        tc, tm = step(rem)
        epoch, comm = epoch + tc + tm, comm + tm
    return epoch, comm


def measured_cores(runs):
    """the physical cores of the machine the runs (and bench/comm, run beside them) used:
    the model-runs rows' physical_cores (their median), else this machine's"""
    c = partrain.median(r["_v"]["physical_cores"] for r in runs) if runs else None
    return int(c) if c else (os.cpu_count() or 1)


def beside_exchange(cm, program, sync, transport, p, nodes, per_node, m):
    """(bench/comm op, the fitted seconds of that op) for the exchange a configuration makes
    once per step, as bench/model-runs.sh measures it beside each run; None where there is
    none or it is not one bench/comm op (shm within a node, shm with several ranks per node)"""
    if p <= 1:
        return None
    if program == "mpi" and sync == "shm":
        if nodes > 1 and per_node == 1:   # the leaders' allreduce is every rank's
            return "allreduce", allreduce_time(nodes, m, *cm.get(transport, "allreduce").ab(m))
        return None
    if program == "hybrid":
        sync = cm.sync_op(sync, program)
    return cm.sync_op(sync), cm.sync_time(sync, transport, p, nodes, per_node, m)


BESIDE_MAX_AGE_S = 1800   # a beside row is the run's when measured at most this long before the run's row


def when(ts):
    """a CSV timestamp (2026-11-25T12:34:56Z) as a datetime, None when it is not one"""
    try:
        return datetime.datetime.strptime(ts.strip(), "%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, AttributeError):
        return None


def same_round_scale(cm, beside, rs, program, sync, transport, p, nodes, per_node, m):
    """median over the runs rs of (bench/comm's time of the run's exchange, measured just
    before the run (its size within 1 % of m: bench/comm counts the padded parameters):
    the latest beside row not after the run's row, and at most
    BESIDE_MAX_AGE_S before it) / the fit's; None without such rows"""
    ex = beside_exchange(cm, program, sync, transport, p, nodes, per_node, m)
    if not ex or not beside or ex[1] <= 0:
        return None
    op, fitted = ex
    ratios = []
    for r in rs:
        end = when(r["timestamp"])
        cand = [b for b in beside if b["transport"] == transport and b["op"] == op and b["p"] == p
                and b["nodes"] == nodes and abs(b["m"] - m) <= 0.01 * m and end is not None and when(b["ts"]) is not None
                and 0 <= (end - when(b["ts"])).total_seconds() <= BESIDE_MAX_AGE_S]
        if cand:
            ratios.append(max(cand, key=lambda b: when(b["ts"]))["t"] / fitted)
    return partrain.median(ratios) if ratios else None


def validation(cm, comp, runs, thread_eff, beside=None):
    """[(label, transport, pred epoch, meas epoch, err, pred comm, meas comm, comm err, runs, disturbed)]"""
    groups = {}
    for r in runs:
        if r["program"] not in ("mpi", "hybrid"):    # serial and openmp rows are the model's inputs
            continue
        v = r["_v"]
        k = (r["program"], r["variant"], r["transport"], int(v["ranks"]), int(v["threads"]), int(v["nodes"]),
             int(v["ranks_per_node"]), int(v["physical_cores"]), int(v["batch"]), int(v["train_n"]),
             int(v["image_size"]), r["hidden"])
        groups.setdefault(k, []).append(r)
    out = []
    for k in sorted(groups, key=lambda k: (k[2], k[0], k[1], k[3], k[4], k[8])):
        program, variant, tr, p, t, n, pn, cores, b, tn, img, hid = k
        rs = groups[k]
        me = partrain.col_median(rs, "epoch_seconds_median")
        eps = [partrain.num(r["epoch_seconds_median"]) for r in rs]
        eps = [e for e in eps if e]
        spread = max(eps) / min(eps) - 1.0 if len(eps) > 1 else None   # the runs' own disagreement
        mc = partrain.col_median(rs, "comm_seconds")
        oth = partrain.median(other_load(r) for r in rs) or 0.0
        sync = variant
        pe, pc = predict(cm, comp, program, sync, tr, p, t, n, pn, cores, b, tn, grad_bytes(img, hid), oth,
                         thread_eff)
        err = pe / me - 1.0 if me else None
        cerr = pc / mc - 1.0 if mc and p > 1 else None     # one rank: nothing to exchange
        k_same = same_round_scale(cm, beside, rs, program, sync, tr, p, n, pn, grad_bytes(img, hid))
        pe2 = err2 = None
        if k_same is not None:
            pe2, _ = predict(cm, comp, program, sync, tr, p, t, n, pn, cores, b, tn, grad_bytes(img, hid), oth,
                             thread_eff, comm_scale=k_same)
            err2 = pe2 / me - 1.0 if me else None
        label = f"{program} {variant} P={p}" + (f" T={t}" if t > 1 else "") + f" B={b}"
        out.append(dict(label=label, transport=tr, nodes=n, pred=pe, meas=me, err=err, pred_comm=pc,
                        shares_cores=p * t > cores,
                        meas_comm=mc, comm_err=cerr, runs=len(rs), disturbed=partrain.n_disturbed(rs), p=p,
                        program=program, variant=variant, batch=b, k_same=k_same, pred_same=pe2, err_same=err2,
                        spread=spread))
    return out


# ---------------------------------------------------------------- projection


class Cluster:
    """P nodes of C cores (or one GPU each) joined by links of some Gbit/s and latency alpha"""

    def __init__(self, comp, cm, cores=64, thread_eff=0.85, gpu_rate=None, alpha_us=ALPHA_IB_US, train_n=60000,
                 m=None, hidden=None):
        self.comp, self.cores, self.E, self.gpu = comp, cores, thread_eff, gpu_rate
        self.alpha, self.train_n = alpha_us * 1e-6, train_n
        self.m = m if m is not None else grad_bytes(28, "256x128")
        self.cm = cm
        self.hidden = comp.hidden if hidden is None else hidden

    def local(self, m):
        """(alpha, beta) of shared memory inside a node for m bytes"""
        return self.cm.local(m) if self.cm else (LOCAL_ALPHA_US * 1e-6, 1.0 / (LOCAL_GBYTE_S * 1e9))

    def programs(self):
        return ("gpu",) if self.gpu else ("mpi", "hybrid")

    def algos(self, program):
        return ("ring", "recursive-doubling", "reduce-bcast", "overlap") + (("hierarchical",) if program == "mpi" else ())

    def comm_step(self, algo, program, nodes, m, gbit, t_comp=0.0):
        """seconds of one gradient exchange of m bytes"""
        net = (self.alpha, 8.0 / (gbit * 1e9))
        local = self.local(m)
        per = self.cores if program == "mpi" else 1
        p = nodes * per
        if p <= 1:
            return 0.0
        # a flat algorithm runs at the slowest link it crosses: with several ranks per node
        # some of its hops stay inside a node, so it is never faster than shared memory
        if nodes == 1:
            ab = local
        elif per > 1:
            ab = (max(net[0], local[0]), max(net[1], local[1]))
        else:
            ab = net
        if algo == "ring":
            return cost(ring(p, m), *ab)
        if algo == "recursive-doubling":
            return cost(recursive_doubling(p, m), *ab)
        if algo == "reduce-bcast":
            return cost(reduce_bcast(p, m), *ab)
        if algo == "hierarchical":
            return hierarchical_time(nodes, per, m, net, local)
        if algo == "overlap":
            t = allreduce_time(p, m, *ab)
            return t - min(self.hidden * t, BACKWARD_SHARE * t_comp)
        raise ValueError(algo)

    def comp_step(self, program, nodes, rows):
        if program == "gpu":
            return rows / nodes / self.gpu
        if program == "mpi":
            return self.comp.t_step(math.ceil(rows / (nodes * self.cores)))
        return self.comp.t_step(math.ceil(rows / nodes)) / (self.cores * self.E)

    def feasible(self, program, nodes, batch):
        return batch >= nodes * (self.cores if program == "mpi" else 1)

    def epoch(self, program, nodes, batch, gbit, algo=None):
        """(epoch seconds, comm seconds, winning algorithm) with algo, or the fastest"""
        full, rem = steps_of(self.train_n, batch)
        best = None
        for a in ([algo] if algo else self.algos(program)):
            e = c = 0.0
            for rows, k in ((batch, full), (rem, 1 if rem else 0)):
                if not k:
                    continue
                tc = self.comp_step(program, nodes, rows)
                tm = self.comm_step(a, program, nodes, self.m, gbit, tc)
                e, c = e + k * (tc + tm), c + k * tm
            if best is None or e < best[0]:
                best = (e, c, a)
        return best

    def efficiency(self, program, nodes, batch, gbit):
        e1 = self.epoch(program, 1, batch, gbit)[0]
        e = self.epoch(program, nodes, batch, gbit)[0]
        return e1 / e / nodes

    def step(self, program, nodes, batch, gbit):
        """seconds of one step of the global batch, the fastest algorithm"""
        tc = self.comp_step(program, nodes, batch)
        return tc + min(self.comm_step(a, program, nodes, self.m, gbit, tc) for a in self.algos(program))

    def step_efficiency(self, program, nodes, batch, gbit):
        """efficiency of one step: no epoch of n samples caps the batch"""
        return self.step(program, 1, batch, gbit) / self.step(program, nodes, batch, gbit) / nodes

    def batch_for(self, program, nodes, gbit, target=TARGET_EFF, cap=2 ** 24):
        """the smallest global batch with efficiency >= target at P nodes (None above cap)"""
        lo = nodes * (self.cores if program == "mpi" else 1)
        b = lo
        while b <= cap and self.step_efficiency(program, nodes, b, gbit) < target:
            b *= 2
        if b > cap:
            return None
        hi, lo = b, max(lo, b // 2)
        if hi == lo:
            return hi
        while hi - lo > max(1, hi // 1000):
            mid = (lo + hi) // 2
            if self.step_efficiency(program, nodes, mid, gbit) >= target:
                hi = mid
            else:
                lo = mid
        return hi


def write_dat(path, header, rows):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for h in header:
            f.write(f"# {h}\n")
        for r in rows:
            if r is None:
                f.write("\n\n")     # a gnuplot index block ends
            else:
                f.write(" ".join(fmt(v) for v in r) + "\n")
    return tmp


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def project(cl, outdir, cm):
    """write DIR/model-*.dat; returns the summary lines"""
    progs = cl.programs()
    main = progs[-1]         # hybrid (or gpu): one rank per node
    files = {}
    # 1. efficiency vs nodes for every batch, main program, 100 Gbit
    rows, titles = [], []
    for b in BATCHES:
        titles.append(f"{main}, global batch {b}")
        for n in NODES:
            if cl.feasible(main, n, b):
                e, c, a = cl.epoch(main, n, b, 100)
                rows.append((n, e, cl.efficiency(main, n, b, 100) * n, cl.efficiency(main, n, b, 100), c / e, a))
        rows.append(None)
    hdr = [f"model.py project: {main}, 100 Gbit/s, alpha {cl.alpha * 1e6:g} us; one block per global batch "
           "(titles: model-eff-batch-index.dat)", "nodes epoch_s speedup efficiency comm_share best_algorithm"]
    files["model-eff-batch.dat"] = write_dat(os.path.join(outdir, "model-eff-batch.dat"), hdr, rows)
    files["model-eff-batch-index.dat"] = write_dat(os.path.join(outdir, "model-eff-batch-index.dat"), [], [])
    idx1 = titles
    # 2. efficiency vs nodes at batch 1024 per program x link
    rows, titles = [], []
    for prog in progs:
        for g in LINKS_GBIT:
            titles.append(f"{prog}, {g} Gbit/s")
            for n in NODES:
                if cl.feasible(prog, n, 1024):
                    e, c, a = cl.epoch(prog, n, 1024, g)
                    eff = cl.efficiency(prog, n, 1024, g)
                    rows.append((n, e, eff * n, eff, c / e, a))
            rows.append(None)
    hdr = [f"model.py project: global batch 1024, alpha {cl.alpha * 1e6:g} us; one block per program x link "
           "(titles: model-eff-link-index.dat)", "nodes epoch_s speedup efficiency comm_share best_algorithm"]
    files["model-eff-link.dat"] = write_dat(os.path.join(outdir, "model-eff-link.dat"), hdr, rows)
    idx2 = titles
    # 3. one exchange vs message size, 16 nodes, 100 Gbit: one rank per node (hybrid's
    # layout), and C ranks per node (mpi's): flat ring over all 16*C ranks vs hierarchical
    hdr = [f"model.py project: one allreduce of BYTES per rank, 16 nodes, 100 Gbit/s, alpha {cl.alpha * 1e6:g} us; "
           f"columns 2-4: one rank per node, 5-6: {cl.cores} ranks per node",
           "bytes ring recursive_doubling reduce+bcast hierarchical_{0}/node ring_{0}/node".format(cl.cores)]
    rows = []
    for k in range(2, 27):
        m = 2 ** k
        rows.append((m,) + tuple(cl.comm_step(a, "hybrid", 16, m, 100) for a in ("ring", "recursive-doubling",
                                                                               "reduce-bcast"))
                    + (cl.comm_step("hierarchical", "mpi", 16, m, 100), cl.comm_step("ring", "mpi", 16, m, 100)))
    files["model-algos.dat"] = write_dat(os.path.join(outdir, "model-algos.dat"), hdr, rows)
    # 4. the global batch for 80 % efficiency
    cols = [(p, g) for p in progs for g in LINKS_GBIT]
    hdr = [f"model.py project: the smallest global batch with >= {TARGET_EFF:.0%} efficiency (- : none up to 2^24), "
           f"alpha {cl.alpha * 1e6:g} us", "nodes " + " ".join(f"{p}_{g}gbit" for p, g in cols)]
    rows = [(n,) + tuple(cl.batch_for(p, n, g) for p, g in cols) for n in NODES[1:]]
    files["model-batch80.dat"] = write_dat(os.path.join(outdir, "model-batch80.dat"), hdr, rows)
    for name, titles in (("model-eff-batch-index.dat", idx1), ("model-eff-link-index.dat", idx2)):
        tmp = os.path.join(outdir, name) + ".tmp"
        with open(tmp, "w") as f:
            f.write("".join(t + "\n" for t in titles))
        files[name] = tmp
    for name, tmp in files.items():
        os.replace(tmp, os.path.join(outdir, name))
    return sorted(files)


# ---------------------------------------------------------------- text output


def size_range(fit, i):
    """the message sizes of regime i of a fit, in words"""
    if len(fit.regimes) == 1:
        return "all"
    lo = int(fit.regimes[i][0])
    hi = int(fit.regimes[i + 1][0]) if i + 1 < len(fit.regimes) else None
    return f"<{hi}B" if i == 0 else f">={lo}B" if hi is None else f"{lo}-{hi}B"


def fit_lines(cm, comp):
    out = [f"{'transport':<12} {'op':<13} {'alpha_us':>10} {'beta_ns/B':>10} {'GB/s':>8} {'rows':>5} "
           f"{'rms_resid':>9} {'max_resid':>9} {'bytes':>10}  algorithms"]
    for (tr, op), f in sorted(cm.fits.items()):
        for i, (lo, a, b, res, algos) in enumerate(f.regimes):
            gbs = 1e-9 / b if b > 0 else None
            rms = math.sqrt(sum(r * r for r in res) / len(res)) if res else 0.0
            worst = max((abs(r) for r in res), default=0.0)
            out.append(f"{tr:<12} {op:<13} {a * 1e6:>10.3f} {b * 1e9:>10.4f} "
                       f"{(f'{gbs:.2f}' if gbs else '-'):>8} {len(res):>5} {rms:>9.1%} {worst:>9.1%} "
                       f"{size_range(f, i):>10}  " + ", ".join(f"{k} {v}" for k, v in sorted(algos.items())))
    if cm.spacing_points:
        out.append("")
        out.append("spacing factor (back to back with a training step between calls, its measured us / OSU's way, "
                   "same size; bench/comm --gap-rows):")
        out.extend(spacing_lines(cm))
    if comp:
        out.append("")
        out.append(f"compute: t_step(b) = {comp.a * 1e3:.4f} ms + {comp.c * 1e6:.4f} us * b per core ({comp.form}); "
                   "residuals: " + ", ".join(f"b={b} {r:+.1%}" for b, r in comp.resid))
        out.append("the model uses the measured batches' per-sample times, interpolated in log b (this fit outside "
                   "them): " + ", ".join(f"b={b} {t * 1e6:.2f} us" for b, t in comp.per_sample))
        out.append("overlap hides " + (f"{comp.hidden:.0%} of the allreduce (median of {len(comp.overlap_pairs)} "
                                       "measured mpi overlap/allreduce pairs)" if comp.overlap_pairs else
                                       "nothing: no mpi overlap/allreduce pair measured"))
        for v, ts in sorted(comp.eff.items()):
            out.append(f"thread efficiency (openmp --accum {v} rows, per thread count at each measured batch; "
                       + ("hybrid's threads" if v == "reduction" else "mpi --sync shm's ranks") + "): " + "; ".join(
                           f"T={t} " + ", ".join(f"b={b} {e:.2f}" for b, e in pts) for t, pts in sorted(ts.items())))
    return out


def spacing_rows(cm):
    """[(transport, op, P, nodes, bytes, [(gap us, factor)])] of the measured spacing factors"""
    return [(tr, op, p, n, int(m), [(g * 1e6, k) for g, k in pts])
            for (tr, op, p, n, m), pts in sorted(cm.spacing_points.items())]


def spacing_lines(cm):
    return [f"  {tr:<12} {op:<13} P={p} nodes={n} {m:>9} B: " + ", ".join(f"{g:g} us {k:.2f}" for g, k in pts)
            for tr, op, p, n, m, pts in spacing_rows(cm)]


def validation_lines(val):
    out = [f"{'configuration':<34} {'transport':<11} {'pred_epoch':>10} {'meas_epoch':>10} {'error':>7} "
           f"{'pred_comm':>9} {'meas_comm':>9} {'c_error':>7} {'beside':>6} {'error2':>7} {'runs':>4}"]
    for v in val:
        err = f"{v['err']:+.1%}" if v["err"] is not None else "-"
        cerr = f"{v['comm_err']:+.1%}" if v["comm_err"] is not None else "-"
        mc = f"{v['meas_comm']:.4f}" if v["meas_comm"] is not None else "-"
        ks = f"{v['k_same']:.2f}" if v.get("k_same") is not None else "-"
        e2 = f"{v['err_same']:+.1%}" if v.get("err_same") is not None else "-"
        out.append(f"{v['label']:<34} {v['transport']:<11} {v['pred']:>10.4f} {v['meas']:>10.4f} {err:>7} "
                   f"{v['pred_comm']:>9.4f} {mc:>9} {cerr:>7} {ks:>6} {e2:>7} {v['runs']:>4}"
                   f"{'*' if v['disturbed'] else ''}{' (shares cores)' if v.get('shares_cores') else ''}")
    out.extend(validation_summary(val))
    return out


def validation_summary(val):
    """the criterion's lines: the largest |error| of the epoch time over the configurations
    with a core per worker (the model's domain), then over those whose workers share cores"""
    out = []
    for shared, what in ((False, "with a core per rank x thread (the model's domain)"),
                         (True, "whose ranks x threads share cores (outside it, shown for reference)")):
        errs = [abs(v["err"]) for v in val if v["err"] is not None and v.get("shares_cores", False) == shared]
        if errs:
            out.append(f"max |error| of the epoch time: {max(errs):.1%} over {len(errs)} configurations {what}, "
                       f"{sum(e <= 0.2 for e in errs)} within 20 %")
    misses = [v for v in val if v["err"] is not None and not v.get("shares_cores") and abs(v["err"]) > 0.2]
    if misses:
        out.append("outside 20 %: " + "; ".join(
            f"{v['label']} {v['transport']} {v['err']:+.1%}"
            + (f" (its {v['runs']} runs spread by {v['spread']:.0%})" if v.get("spread") is not None else "")
            for v in misses))
    same = [abs(v["err_same"] if v.get("err_same") is not None else v["err"]) for v in val
            if v["err"] is not None and not v.get("shares_cores")]
    if any(v.get("err_same") is not None for v in val) and same:
        out.append(f"same round (error2: each run's exchange scaled by bench/comm's measured beside it, column "
                   f"beside = measured / fitted; where none, error): max |error| {max(same):.1%}, "
                   f"{sum(e <= 0.2 for e in same)} of {len(same)} within 20 %")
    return out


class Parser(argparse.ArgumentParser):
    """usage errors in one line, exit 2"""

    def error(self, message):
        print(f"{PROG}: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def main(argv):
    if argv in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    ap = Parser(prog=PROG, description="alpha-beta model of partrain's data-parallel training "
                "(fit, validate, project); see docs/model.md")
    sub = ap.add_subparsers(dest="cmd", metavar="{fit,validate,project}", parser_class=Parser)
    for name, hlp in (("fit", "alpha, beta per transport and op, t_step(b), with residuals"),
                      ("validate", "predicted vs measured epoch and comm seconds of model-runs.csv"),
                      ("project", "write DIR/model-*.dat for P = 1 ... 1024 nodes")):
        p = sub.add_parser(name, help=hlp)
        p.add_argument("--comm", default="results/comm.csv", metavar="CSV")
        p.add_argument("--runs", default="results/model-runs.csv", metavar="CSV")
        if name == "validate":
            p.add_argument("--beside", default=None, metavar="CSV",
                           help="bench/comm rows measured beside each run (default: comm-beside.csv next to --runs)")
        p.add_argument("--thread-eff", type=float, default=0.85, metavar="E",
                       help="efficiency of T threads where no openmp rows measured it (default 0.85)")
        if name == "project":
            p.add_argument("--outdir", default="results", metavar="DIR")
            p.add_argument("--cores-per-node", type=int, default=64, metavar="C")
            p.add_argument("--gpu-samples-per-s", type=float, default=None, metavar="R")
            p.add_argument("--alpha-us", type=float, default=ALPHA_IB_US, metavar="A",
                           help=f"link latency in us (default {ALPHA_IB_US:g}: InfiniBand-like; "
                                f"{ALPHA_TCP_US:g}: TCP-like)")
            p.add_argument("--train-n", type=int, default=60000, metavar="N")
    a = ap.parse_args(argv)
    if not a.cmd:
        print(f"{PROG}: no subcommand: fit, validate or project (see --help)", file=sys.stderr)
        return 2
    try:
        if not (0 < a.thread_eff <= 1):
            raise BadInput(f"--thread-eff {a.thread_eff}: not in (0, 1]")
        if a.cmd == "project":
            if a.cores_per_node < 1 or a.train_n < 1 or a.alpha_us < 0 or (a.gpu_samples_per_s is not None
                                                                           and a.gpu_samples_per_s <= 0):
                raise BadInput("--cores-per-node, --train-n, --gpu-samples-per-s must be positive, --alpha-us >= 0")
            if not os.path.isdir(a.outdir):
                raise BadInput(f"{a.outdir}: not a directory")
        if a.cmd == "fit":
            runs = read_runs(a.runs) if os.path.isfile(a.runs) else None
            cm = CommModel(read_comm(a.comm), measured_cores(runs))
            comp = Compute(runs) if runs else None
            print("\n".join(fit_lines(cm, comp)))
            return 0
        runs = read_runs(a.runs)
        comp = Compute(runs)
        if a.cmd == "validate":
            cm = CommModel(read_comm(a.comm), measured_cores(runs))
            for tr in sorted({r["transport"] for r in runs if r["program"] in ("mpi", "hybrid")}):
                cm.get(tr, "allreduce")       # every transport of the runs must have comm rows
            bf = a.beside or os.path.join(os.path.dirname(a.runs) or ".", "comm-beside.csv")
            beside = read_comm(bf) if (a.beside or os.path.isfile(bf)) else None
            print("\n".join(validation_lines(validation(cm, comp, runs, a.thread_eff, beside))))
            return 0
        cm = CommModel(read_comm(a.comm), measured_cores(runs)) if os.path.isfile(a.comm) else None
        cl = Cluster(comp, cm, a.cores_per_node, a.thread_eff, a.gpu_samples_per_s, a.alpha_us, a.train_n)
        names = project(cl, a.outdir, cm)
        print(f"{PROG}: wrote " + ", ".join(os.path.join(a.outdir, n) for n in names))
        return 0
    except BadInput as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    except (partrain.CSVError, OSError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
