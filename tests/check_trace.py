#!/usr/bin/python3
"""tests/check_trace.py FILE RANKS THREADS: checks a --trace file against docs/tracing.md.

The JSON loads and starts with the suite's signature; otherData's keys; every event is
"X" or "M" with finite ts and dur >= 0; pid < RANKS, tid < THREADS; cat is one of the
format's; per rank every traced step has one "step" span on tid 0 whose top-level spans
(tid 0, not inside another non-step span) do not overlap and leave no unmarked part.
An unmarked part of the code sits at the same place of every step: between the same two
spans. A preemption of a busy machine falls between any two spans, in some steps. So the
check takes each place's gap (from the step's begin to its first span, between two
consecutive spans, from the last span to the step's end; 0 in a step without that
place) over every step of the rank, and fails if the median gap of any place, or the sum
of those medians, exceeds 2 % of the median step: a run whose every step is preempted
somewhere still passes, a step with a part nobody marked does not. Worker threads carry
no step spans. Prints one line per problem (the first 5) and exits 1,
or prints "ok: N events, S steps x R ranks" and exits 0.
"""
import json
import math
import sys
from statistics import median

CATS = {"step", "data", "compute", "comm", "wait", "update", "eval", "checkpoint"}
SIGNATURE = '{"partrain_trace":1,'


def main():
    path, ranks, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    problems = []
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    if not text.startswith(SIGNATURE):
        problems.append("does not start with " + SIGNATURE)
    doc = json.loads(text)
    keys = list(doc.keys())
    if keys != ["partrain_trace", "otherData", "displayTimeUnit", "traceEvents"]:
        problems.append("top-level keys %s" % keys)
    other = doc.get("otherData", {})
    for k in ("program", "variant", "ranks", "threads", "batch", "epochs", "first_step", "steps_traced", "clock"):
        if k not in other:
            problems.append("otherData lacks " + k)
    if other.get("ranks") != ranks or other.get("threads") != threads:
        problems.append("otherData ranks/threads %s/%s, expected %d/%d"
                        % (other.get("ranks"), other.get("threads"), ranks, threads))
    events = doc["traceEvents"]
    spans = []
    for e in events:
        ph = e.get("ph")
        if ph not in ("X", "M"):
            problems.append("event with ph %r" % ph)
            continue
        pid, tid = e.get("pid"), e.get("tid")
        if not (isinstance(pid, int) and 0 <= pid < ranks and isinstance(tid, int) and 0 <= tid < threads):
            problems.append("pid/tid %r/%r out of range" % (pid, tid))
        if ph == "M":
            continue
        ts, dur = e.get("ts"), e.get("dur")
        if not (isinstance(ts, (int, float)) and isinstance(dur, (int, float))
                and math.isfinite(ts) and math.isfinite(dur) and ts >= 0 and dur >= 0):
            problems.append("bad ts/dur %r/%r in %s" % (ts, dur, e.get("name")))
            continue
        if e.get("cat") not in CATS:
            problems.append("cat %r" % e.get("cat"))
        args = e.get("args", {})
        if "epoch" not in args or "step" not in args:
            problems.append("span %s without epoch/step" % e.get("name"))
            continue
        spans.append(e)
    steps_per_rank = {}
    for r in range(ranks):
        steps = [e for e in spans if e["pid"] == r and e["cat"] == "step"]
        if any(e["tid"] != 0 for e in steps):
            problems.append("rank %d: a step span off tid 0" % r)
        steps_per_rank[r] = len(steps)
        if not steps:
            problems.append("rank %d: no step spans" % r)
        by_step = {}
        for e in spans:
            if e["pid"] == r and e["tid"] == 0 and e["cat"] != "step" and e["args"]["step"] >= 0:
                by_step.setdefault((e["args"]["epoch"], e["args"]["step"]), []).append(e)
        gaps = {}                             # place (span before, span after) -> [gap in one step]
        for n, s in enumerate(steps):
            key = (s["args"]["epoch"], s["args"]["step"])
            t0, t1 = s["ts"], s["ts"] + s["dur"]
            inside = sorted(by_step.get(key, []), key=lambda e: (e["ts"], -e["dur"]))
            end, before, top = t0, "(step begin)", []
            for e in inside:
                b, f = e["ts"], e["ts"] + e["dur"]
                if b < t0 - 0.002 or f > t1 + 0.002:
                    problems.append("rank %d step %s: %s [%.3f, %.3f] outside the step [%.3f, %.3f]"
                                    % (r, key, e["name"], b, f, t0, t1))
                    continue
                if b >= end - 0.002:          # top level: begins after the previous top-level span ends
                    gaps.setdefault((before, e["name"]), {})[n] = max(0.0, b - end)
                    top.append(e)
                    end, before = f, e["name"]
                elif f > end + 0.002:         # overlaps a top-level span without nesting in it
                    problems.append("rank %d step %s: %s overlaps %s" % (r, key, e["name"], top[-1]["name"]))
            gaps.setdefault((before, "(step end)"), {})[n] = max(0.0, t1 - end)
        if steps:
            step_median = median([s["dur"] for s in steps])
            place_median = {place: median([g.get(n, 0.0) for n in range(len(steps))]) for place, g in gaps.items()}
            unmarked = sorted(((m, place) for place, m in place_median.items() if m > 0), reverse=True)
            if sum(m for m, _ in unmarked) > 0.02 * step_median:
                problems.append("rank %d: unmarked time in the median step, %.3f of %.3f us (more than 2 %%)"
                                % (r, sum(m for m, _ in unmarked), step_median))
                problems.extend("rank %d: between %s and %s: median gap %.3f us" % (r, a, b, m)
                                for m, (a, b) in unmarked[:3])
    first = min((e["args"]["step"] for e in spans if e["cat"] == "step"), default=None)
    if first is not None and first != other.get("first_step"):
        problems.append("first_step %s, the first step span is step %s" % (other.get("first_step"), first))
    if other.get("steps_traced") != steps_per_rank.get(0):
        problems.append("steps_traced %s, rank 0 has %s step spans" % (other.get("steps_traced"), steps_per_rank.get(0)))
    if problems:
        for p in problems[:5]:
            print(p)
        if len(problems) > 5:
            print("... %d problems in all" % len(problems))
        return 1
    print("ok: %d events, %d steps x %d ranks" % (len(events), steps_per_rank.get(0, 0), ranks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
