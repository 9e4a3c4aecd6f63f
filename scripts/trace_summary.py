#!/usr/bin/env python3
"""
scripts/trace_summary.py — the per-rank summary of a partrain trace (a trainer's --trace
FILE: Chrome trace-event JSON, docs/tracing.md), the numbers a reader needs to see where
a strategy's step goes before opening the timeline itself.

  trace_summary.py FILE... [--json]      the summary of each FILE (text, or JSON: one
                                         object, or a list of them for several files)
  trace_summary.py --csv OUT FILE...     one row per FILE x rank into OUT (written
                                         atomically; the strategy is FILE's name without
                                         .json), as run_all.sh's timelines step does

Per rank, over the traced training steps: the seconds of the step spans and of each cat
(data, compute, comm, wait, update) of the top-level spans of thread 0 (a span nested in
another on the same track is not counted twice), "other" (the part of the steps no
top-level span covers), synchronisations per step (the comm and wait spans of thread 0,
nested ones too: every MPI call, barrier, critical entry, window sync or pipeline idle;
one inside another comm or wait span is part of that synchronisation, not another),
and each worker thread's (tid > 0) seconds per cat. Then the line
  waited for: rank R (compute X % above the median rank; others waited Y s)
R: the rank with the most compute+data+update per step; named when that is more than
5 % above the median rank's (the lower median: a real rank) and the other ranks spent
longer in comm+wait than R did; Y: the seconds the others spent in comm+wait beyond R's
own comm+wait, summed over them. Otherwise "waited for: none (ranks balanced within 5 %)"
(one-rank traces: "waited for: none (one rank)").

Bad input (a missing or unreadable file, not JSON, not a partrain trace, an event that
breaks the format, no traced step): one line on stderr naming the file, exit 2, nothing
written. Python 3 standard library only; numbers printed the same under every locale.
"""

import argparse
import csv
import io
import json
import math
import os
import statistics
import sys

PROG = "trace_summary.py"
CATS = ("step", "data", "compute", "comm", "wait", "update", "eval", "checkpoint")
STEP_CATS = ("data", "compute", "comm", "wait", "update")   # what a step is made of
NEST_EPS = 0.002   # µs: ts and dur carry 3 decimals, so a nested span may end 0.001 past its parent
CSV_HEADER = ("strategy", "trainer", "variant", "ranks", "threads", "batch", "rank", "steps", "step_s",
              "data_s", "compute_s", "comm_s", "wait_s", "update_s", "other_s", "syncs_per_step",
              "workers_wait_s", "waited_for", "above_median_pct", "others_waited_s")


class TraceError(Exception):
    """the one line that says why FILE is not a usable trace"""


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _count(v):
    return isinstance(v, int) and not isinstance(v, bool)


def load(path):
    """the trace at PATH: (otherData dict, list of span dicts name/cat/ts/dur/pid/tid/epoch/step);
    TraceError naming the problem"""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror.lower() if e.strerror else e}") from e
    if not raw.lstrip().startswith(b'{"partrain_trace":'):
        try:
            json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise TraceError(f"{path}: not JSON ({e})") from e
        raise TraceError(f"{path}: not a partrain trace (it does not start with {{\"partrain_trace\":1,)")
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: not JSON ({e})") from e
    if not isinstance(doc, dict) or doc.get("partrain_trace") != 1:
        raise TraceError(f"{path}: not a partrain trace of format 1 (partrain_trace is {doc.get('partrain_trace')!r})")
    other, events = doc.get("otherData"), doc.get("traceEvents")
    if not isinstance(other, dict) or not isinstance(events, list):
        raise TraceError(f"{path}: a partrain trace needs an otherData object and a traceEvents list")
    spans = []
    for k, e in enumerate(events):
        where = f"{path}: traceEvents[{k}]"
        if not isinstance(e, dict):
            raise TraceError(f"{where}: not an object")
        ph = e.get("ph")
        if ph == "M":
            continue
        if ph != "X":
            raise TraceError(f"{where}: ph {ph!r} (a partrain trace has complete 'X' and metadata 'M' events only)")
        if e.get("cat") not in CATS:
            raise TraceError(f"{where}: cat {e.get('cat')!r} is none of {', '.join(CATS)}")
        if not isinstance(e.get("name"), str):
            raise TraceError(f"{where}: no name")
        if not (_number(e.get("ts")) and _number(e.get("dur")) and e["dur"] >= 0):
            raise TraceError(f"{where}: ts and dur must be finite numbers, dur >= 0 (ts {e.get('ts')!r}, "
                             f"dur {e.get('dur')!r})")
        if not (_count(e.get("pid")) and _count(e.get("tid")) and e["pid"] >= 0 and e["tid"] >= 0):
            raise TraceError(f"{where}: pid and tid must be integers >= 0")
        args = e.get("args")
        if not (isinstance(args, dict) and _count(args.get("epoch")) and _count(args.get("step"))):
            raise TraceError(f"{where}: args must hold the integers epoch and step")
        spans.append({"name": e["name"], "cat": e["cat"], "ts": float(e["ts"]), "dur": float(e["dur"]),
                      "pid": e["pid"], "tid": e["tid"], "epoch": args["epoch"], "step": args["step"]})
    if not any(s["cat"] == "step" for s in spans):
        raise TraceError(f"{path}: no training step traced (no span of cat step; otherData.steps_traced "
                         f"{other.get('steps_traced')!r})")
    return other, spans


def mark_nesting(spans):
    """sets, on every span that is not a step, s['top']: False when it lies inside another
    non-step span of the same track (pid, tid), and s['in_sync']: True when one of the
    spans it lies inside is a comm or wait span (an MPI call inside a window sync's wait
    is part of that one synchronisation)"""
    tracks = {}
    for s in spans:
        if s["cat"] != "step":
            tracks.setdefault((s["pid"], s["tid"]), []).append(s)
    for track in tracks.values():
        track.sort(key=lambda s: (s["ts"], -s["dur"]))
        open_spans = []   # the spans enclosing the current one, outermost first
        for s in track:
            while open_spans and not (s["ts"] + s["dur"] <= open_spans[-1]["ts"] + open_spans[-1]["dur"] + NEST_EPS):
                open_spans.pop()
            s["top"] = not open_spans
            s["in_sync"] = any(a["cat"] in ("comm", "wait") for a in open_spans)
            open_spans.append(s)


def summarize(path):
    """the summary of the trace at PATH as a dict (what --json prints)"""
    other, spans = load(path)
    mark_nesting(spans)
    steps = {}   # pid -> {step: step span}
    for s in spans:
        if s["cat"] == "step":
            steps.setdefault(s["pid"], {})[s["step"]] = s
    ranks = []
    for pid in sorted({s["pid"] for s in spans}):
        mine = steps.get(pid, {})
        n = len(mine)
        cats = dict.fromkeys(STEP_CATS, 0.0)
        syncs = 0
        workers = {}
        epoch_level = {"eval": 0.0, "checkpoint": 0.0}
        for s in spans:
            if s["pid"] != pid or s["cat"] == "step":
                continue
            if s["cat"] in epoch_level:
                if s["tid"] == 0 and s["top"]:
                    epoch_level[s["cat"]] += s["dur"] / 1e6
                continue
            if s["step"] not in mine:
                continue
            if s["tid"] == 0:
                if s["top"]:
                    cats[s["cat"]] += s["dur"] / 1e6
                if s["cat"] in ("comm", "wait") and not s["in_sync"]:
                    syncs += 1
            elif s["top"]:
                w = workers.setdefault(s["tid"], dict.fromkeys(STEP_CATS, 0.0))
                w[s["cat"]] += s["dur"] / 1e6
        step_s = sum(s["dur"] for s in mine.values()) / 1e6
        ranks.append({"rank": pid, "steps": n, "step_s": step_s, **{f"{c}_s": cats[c] for c in STEP_CATS},
                      "other_s": step_s - sum(cats.values()),
                      "syncs_per_step": syncs / n if n else 0.0,
                      "eval_s": epoch_level["eval"], "checkpoint_s": epoch_level["checkpoint"],
                      "threads": [{"tid": t, **{f"{c}_s": w[c] for c in STEP_CATS}} for t, w in sorted(workers.items())]})
    return {"file": path, "program": other.get("program"), "variant": other.get("variant"),
            "ranks": other.get("ranks"), "threads": other.get("threads"), "batch": other.get("batch"),
            "steps_traced": other.get("steps_traced"), "rank_summaries": ranks, "waited_for": waited_for(ranks)}


def waited_for(ranks):
    """{rank, above_median_pct, others_waited_s, line}: the rank the others waited for"""
    active = [r for r in ranks if r["steps"] > 0]
    none = {"rank": None, "above_median_pct": None, "others_waited_s": None}
    if len(active) < 2:
        return {**none, "line": "waited for: none (one rank)"}
    busy = {r["rank"]: (r["compute_s"] + r["data_s"] + r["update_s"]) / r["steps"] for r in active}
    sync = {r["rank"]: r["comm_s"] + r["wait_s"] for r in active}
    slow = max(active, key=lambda r: (busy[r["rank"]], -r["rank"]))["rank"]
    median = statistics.median_low(busy.values())
    above = (busy[slow] / median - 1) * 100 if median > 0 else math.inf
    others = [r["rank"] for r in active if r["rank"] != slow]
    extra = sum(max(0.0, sync[o] - sync[slow]) for o in others)
    if above > 5 and sum(sync[o] for o in others) / len(others) > sync[slow]:
        return {"rank": slow, "above_median_pct": above, "others_waited_s": extra,
                "line": f"waited for: rank {slow} (compute {above:.0f} % above the median rank; "
                        f"others waited {extra:.3f} s)"}
    return {**none, "line": "waited for: none (ranks balanced within 5 %)"}


def text(sm):
    """the summary as the lines a reader sees"""
    rs = sm["rank_summaries"]
    who = f"{sm['program']}{' ' + sm['variant'] if sm['variant'] else ''}"
    out = [f"{sm['file']}: {who}, {sm['ranks']} rank(s) x {sm['threads']} thread(s), batch {sm['batch']}, "
           f"{max((r['steps'] for r in rs), default=0)} step(s) traced"]
    cols = ("step", "data", "compute", "comm", "wait", "update", "other")
    out.append(f"{'rank':>4} {'steps':>6} " + " ".join(f"{c + ' s':>10}" for c in cols) + f" {'syncs/step':>10}"
               "   (top-level spans of thread 0, summed over the traced steps)")
    for r in rs:
        out.append(f"{r['rank']:>4} {r['steps']:>6} " + " ".join(f"{r[c + '_s']:>10.6f}" for c in cols)
                   + f" {r['syncs_per_step']:>10.2f}")
    out.append(f"{'rank':>4} {'':>6} " + " ".join(f"{c + ' us':>10}" for c in cols) + "   (per step)")
    for r in rs:
        n = max(r["steps"], 1)
        out.append(f"{r['rank']:>4} {'':>6} " + " ".join(f"{r[c + '_s'] / n * 1e6:>10.1f}" for c in cols))
    for r in rs:
        for t in r["threads"]:
            parts = ", ".join(f"{c} {t[c + '_s']:.6f} s" for c in STEP_CATS if t[c + "_s"] > 0)
            out.append(f"rank {r['rank']} thread {t['tid']}: {parts or 'no spans in the traced steps'}")
        if r["eval_s"] or r["checkpoint_s"]:
            out.append(f"rank {r['rank']} outside the steps: eval {r['eval_s']:.6f} s, checkpoint {r['checkpoint_s']:.6f} s")
    out.append(sm["waited_for"]["line"])
    return "\n".join(out)


def csv_rows(sm, strategy):
    wf = sm["waited_for"]
    for r in sm["rank_summaries"]:
        yield [strategy, sm["program"], sm["variant"], sm["ranks"], sm["threads"], sm["batch"], r["rank"], r["steps"],
               *(f"{r[c]:.6f}" for c in ("step_s", "data_s", "compute_s", "comm_s", "wait_s", "update_s", "other_s")),
               f"{r['syncs_per_step']:.3f}", f"{sum(t['wait_s'] for t in r['threads']):.6f}",
               "none" if wf["rank"] is None else wf["rank"],
               "" if wf["above_median_pct"] is None else f"{wf['above_median_pct']:.1f}",
               "" if wf["others_waited_s"] is None else f"{wf['others_waited_s']:.6f}"]


def write_csv(out, sums):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_HEADER)
    for sm in sums:
        w.writerows(csv_rows(sm, os.path.splitext(os.path.basename(sm["file"]))[0]))
    tmp = f"{out}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write(buf.getvalue())
        os.replace(tmp, out)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise TraceError(f"{out}: {e.strerror.lower() if e.strerror else e}") from e


class Parser(argparse.ArgumentParser):
    def error(self, message):   # one line, exit 2
        print(f"{PROG}: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def main(argv):
    ap = Parser(prog=PROG, description="per-rank summary of a partrain trace (docs/tracing-figures.md)")
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--csv", metavar="OUT", help="write one row per FILE x rank into OUT instead")
    a = ap.parse_args(argv)
    if a.json and a.csv:
        ap.error("--json and --csv exclude each other")
    try:
        sums = [summarize(p) for p in a.files]   # every file checked before anything is written
        if a.csv:
            write_csv(a.csv, sums)
            print(f"{PROG}: {a.csv}: {sum(len(s['rank_summaries']) for s in sums)} row(s) from {len(sums)} trace(s)")
        elif a.json:
            print(json.dumps(sums[0] if len(sums) == 1 else sums, indent=1))
        else:
            print("\n\n".join(text(s) for s in sums))
    except TraceError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
