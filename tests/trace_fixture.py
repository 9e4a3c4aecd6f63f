#!/usr/bin/env python3
"""
tests/trace_fixture.py — writes a synthetic partrain trace (the format of docs/tracing.md)
for the tests of scripts/trace_summary.py and scripts/timeline.py, so they do not need a
trainer built with --trace.

  trace_fixture.py OUT [--ranks P] [--threads T] [--steps N] [--slow-rank R:US]
                       [--program NAME] [--variant NAME] [--nested] [--sync-wait]
                       [--clock-offset R:US]

Every rank's step: batch, forward L1..L3, loss, backward L3..L1, then (P > 1) an
MPI_Allreduce whose wait is the time the slowest rank needs longer, then update; worker
threads (T > 1) carry their share of forward/backward and a barrier. --slow-rank R:US
adds a "slowdown" compute span of US µs at the start of rank R's steps (as the trainers'
PARTRAIN_SLOW_RANK hook). --nested puts an MPI_Testall inside backward L2. --sync-wait
makes the exchange a "win_sync" wait span with an MPI_Win_sync comm span inside (one
synchronisation, as mpi/shm's). Step k lasts
longer by a deterministic jitter, ((7 k) mod 11) µs, so the steps differ in duration.
--clock-offset R:US shifts every time of rank R by US µs (a rank whose t0, its barrier
exit, came late).
"""

import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--slow-rank", default="")
    ap.add_argument("--program", default="mpi")
    ap.add_argument("--variant", default="allreduce")
    ap.add_argument("--nested", action="store_true")
    ap.add_argument("--clock-offset", default="")
    ap.add_argument("--sync-wait", action="store_true")
    a = ap.parse_args()
    slow_rank, slow_us = (int(v) for v in a.slow_rank.split(":")) if a.slow_rank else (-1, 0)
    late_rank, late_us = (int(v) for v in a.clock_offset.split(":")) if a.clock_offset else (-1, 0)
    ev = []
    for p in range(a.ranks):
        ev.append({"name": "process_name", "ph": "M", "pid": p, "tid": 0, "args": {"name": f"rank {p}"}})
        for t in range(a.threads):
            ev.append({"name": "thread_name", "ph": "M", "pid": p, "tid": t, "args": {"name": f"thread {t}"}})

    def span(name, cat, ts, dur, p, t, step, epoch=0):
        ts -= late_us if p == late_rank else 0
        ev.append({"name": name, "cat": cat, "ph": "X", "ts": round(ts, 3), "dur": round(dur, 3), "pid": p,
                   "tid": t, "args": {"epoch": epoch, "step": step}})

    layers = (("forward L1", 40.0), ("forward L2", 20.0), ("forward L3", 5.0), ("loss", 3.0),
              ("backward L3", 6.0), ("backward L2", 25.0), ("backward L1", 50.0))
    t0 = 0.0
    for k in range(a.steps):
        jitter = (7 * k) % 11
        busy = {}
        for p in range(a.ranks):   # the compute part of each rank's step
            busy[p] = 4.0 + sum(d for _, d in layers) / a.threads + jitter + (slow_us if p == slow_rank else 0)
        slowest = max(busy.values())
        for p in range(a.ranks):
            t = t0
            span("batch", "data", t, 4.0, p, 0, k)
            t += 4.0
            if p == slow_rank:
                span("slowdown", "compute", t, slow_us, p, 0, k)
                t += slow_us
            for name, d in layers:
                d = d / a.threads + (jitter if name == "forward L1" else 0)
                span(name, "compute", t, d, p, 0, k)
                if a.nested and name == "backward L2":
                    span("MPI_Testall", "comm", t + d / 3, 0.5, p, 0, k)
                for w in range(1, a.threads):
                    span(name, "compute", t, d * 0.9, p, w, k)
                    span("barrier", "wait", t + d * 0.9, d * 0.1, p, w, k)
                t += d
            if a.ranks > 1:
                wait = slowest - busy[p]
                if a.sync_wait:
                    span("win_sync", "wait", t, 10.0 + wait, p, 0, k)
                    span("MPI_Win_sync", "comm", t + wait, 5.0, p, 0, k)
                else:
                    span("MPI_Allreduce", "comm", t, 10.0 + wait, p, 0, k)
                t += 10.0 + wait
            span("update", "update", t, 8.0, p, 0, k)
            t += 8.0
            span("step", "step", t0, t - t0, p, 0, k)
        t0 += slowest + (10.0 if a.ranks > 1 else 0) + 8.0 + 1.0
    for p in range(a.ranks):
        span("eval", "eval", t0 + 5, 300.0, p, 0, -1)
    other = {"program": a.program, "variant": a.variant, "ranks": a.ranks, "threads": a.threads, "batch": 64,
             "epochs": 1, "steps_traced": a.steps, "clock": "CLOCK_MONOTONIC from t0, a barrier exit"}
    with open(a.out, "w") as f:
        f.write('{"partrain_trace":1,\n "otherData":' + json.dumps(other, separators=(",", ":"))
                + ',\n "displayTimeUnit":"ms",\n "traceEvents":[\n'
                + ",\n".join(json.dumps(e, separators=(",", ":")) for e in ev) + "]}\n")


if __name__ == "__main__":
    main()
