#!/usr/bin/env python3
"""
scripts/timeline.py — one training step of a partrain trace (a trainer's --trace FILE,
docs/tracing.md) as a Gantt figure: one row per rank x thread, a box per span coloured by
its cat (data, compute, comm, wait, update; nested spans thinner, on top of their parent;
the step span a grey band behind; the names of the wide spans written on them), time in µs from the step's start on x (the ranks' clocks aligned by the median offset
of their step starts over the traced steps), the step's duration in the title. Drawn by gnuplot (pngcairo when it has it, else png), as every
figure of the suite; scripts/plot.sh draws one per trace of a run (plots/timeline-*.png).

  timeline.py TRACE --out PNG [--step S] [--title T]
      --step S    the training step to draw (args.step, from 0); default: a typical one,
                  the median-duration step among the traced steps after the first 10
                  (all of them when 10 or fewer were traced); a step's duration is its
                  longest rank's step span
      --title T   the title's first part (default: "PROGRAM VARIANT, P rank(s) x T thread(s)")

Prints the step drawn and its duration. Exit status: 0; 2 on a bad input (TRACE not a
partrain trace, the step not traced, PNG a symlink or an existing file that is not a PNG,
a usage error: one line on stderr, nothing written); 1 when gnuplot is missing or fails.
The data file and the gnuplot script are written to a temporary directory, removed after.
Python 3 standard library only.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trace_summary import TraceError, load, mark_nesting  # noqa: E402

PROG = "timeline.py"
COLOURS = {"data": "#8c564b", "compute": "#1f77b4", "comm": "#d62728", "wait": "#ff7f0e", "update": "#2ca02c",
           "eval": "#9467bd", "checkpoint": "#7f7f7f"}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Parser(argparse.ArgumentParser):
    def error(self, message):   # one line, exit 2
        print(f"{PROG}: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def step_durations(spans):
    """{step: duration in µs of its longest rank's step span}"""
    out = {}
    for s in spans:
        if s["cat"] == "step":
            out[s["step"]] = max(out.get(s["step"], 0.0), s["dur"])
    return out


def typical_step(durations):
    """the median-duration step among those after the first 10 traced (ties: the earliest)"""
    steps = sorted(durations)
    later = steps[10:] or steps
    med = statistics.median_low(durations[s] for s in later)
    return min(s for s in later if durations[s] == med)


def check_out(path):
    """TraceError unless PATH may be written: not a symlink, not an existing file that is not a PNG"""
    if os.path.islink(path):
        raise TraceError(f"--out {path}: a symbolic link; refusing to write through it")
    if os.path.exists(path):
        if not os.path.isfile(path):
            raise TraceError(f"--out {path}: exists and is not a file")
        with open(path, "rb") as f:
            if f.read(8) != PNG_SIGNATURE:
                raise TraceError(f"--out {path}: an existing file that is not a PNG; refusing to overwrite it")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise TraceError(f"--out {path}: no directory {d}")


def gp_str(text):
    """TEXT as a gnuplot single-quoted string"""
    return "'" + str(text).replace("'", "''") + "'"


def clock_offsets(spans):
    """{pid: µs to subtract from its times}: each rank's clock starts at its own exit of a
    barrier, which a busy machine can delay by milliseconds on one rank; the median over
    the traced steps of (its step start - rank 0's) estimates that constant offset, and the
    step-to-step differences, the real waiting, stay"""
    starts = {}
    for s in spans:
        if s["cat"] == "step":
            starts.setdefault(s["step"], {})[s["pid"]] = s["ts"]
    ref = min(s["pid"] for s in spans)
    diffs = {}
    for by_pid in starts.values():
        if ref in by_pid:
            for pid, ts in by_pid.items():
                diffs.setdefault(pid, []).append(ts - by_pid[ref])
    return {pid: statistics.median(d) for pid, d in diffs.items()}


def script(spans, step, other, title, dat, png):
    """the gnuplot script drawing STEP's spans (data written to DAT) into PNG"""
    offset = clock_offsets(spans)
    mine = [dict(s, ts=s["ts"] - offset.get(s["pid"], 0.0)) for s in spans if s["step"] == step]
    bands = [s for s in mine if s["cat"] == "step"]
    t0 = min(s["ts"] for s in bands)
    t1 = max(s["ts"] + s["dur"] for s in bands)
    rows = sorted({(s["pid"], s["tid"]) for s in mine})
    row_of = {r: k for k, r in enumerate(rows)}
    epoch = bands[0]["epoch"]
    blocks, names = [], []
    # the step bands, then every cat's top-level spans, then the nested ones (drawn last: on top)
    layers = [("step", lambda s: s["cat"] == "step", 0.45)]
    for cat in COLOURS:
        layers.append((cat, lambda s, c=cat: s["cat"] == c and s.get("top", True), 0.32))
    for cat in COLOURS:
        layers.append((cat + " (nested)", lambda s, c=cat: s["cat"] == c and not s.get("top", True), 0.16))
    for name, keep, half in layers:
        pts = [s for s in mine if keep(s)]
        if not pts:
            continue
        names.append((name, half))
        blocks.append("\n".join(f"{s['ts'] - t0 + s['dur'] / 2:.3f} {row_of[(s['pid'], s['tid'])]} "
                                f"{s['dur'] / 2:.3f} {half}" for s in pts))
    # the names of the top-level spans wide enough to hold them
    wide = [s for s in mine if s["cat"] != "step" and s.get("top", True) and s["dur"] >= 0.07 * (t1 - t0)]
    if wide:
        blocks.append("\n".join(f"{s['ts'] - t0 + s['dur'] / 2:.3f} {row_of[(s['pid'], s['tid'])]} "
                                 f"\"{s['name']}\"" for s in wide))
    with open(dat, "w") as f:
        f.write("# x_center_us row x_half_us y_half (one block per cat, gnuplot index; the last: span names)\n")
        f.write("\n\n\n".join(blocks) + "\n")
    who = title or (f"{other.get('program')}{' ' + other['variant'] if other.get('variant') else ''}, "
                    f"{other.get('ranks')} rank(s) x {other.get('threads')} thread(s)")
    longest = max(s["dur"] for s in bands)
    heading = f"{who}: step {step} (epoch {epoch}) lasts {longest:.1f} µs" + (" on its slowest rank" if len(bands) > 1 else "")
    ytics = ", ".join(f"{gp_str(f'rank {p}, thread {t}')} {k}" for k, (p, t) in enumerate(rows))
    plots = []
    seen = set()
    for k, (name, _) in enumerate(names):
        cat = name.split()[0]
        colour = "#d9d9d9" if cat == "step" else COLOURS[cat]
        label = "notitle" if cat in seen else f"title {gp_str(cat)}"
        seen.add(cat)
        style = "fs solid 1.0 noborder" if cat == "step" else "fs solid 0.9 border lc rgb '#333333'"
        plots.append(f"{gp_str(dat)} index {k} using 1:2:3:4 with boxxyerror {style} "
                     f"fc rgb {gp_str(colour)} {label}")
    if wide:
        plots.append(f"{gp_str(dat)} index {len(names)} using 1:2:3 with labels tc rgb 'white' font ',9' notitle")
    height = max(300, 110 + 60 * len(rows))
    return f"""set encoding utf8
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {{
    set terminal pngcairo size 1400,{height} noenhanced font "Sans,11"
}} else {{
    set terminal png size 1400,{height} font "Sans,11"
}}
set output {gp_str(png)}
set title {gp_str(heading)} noenhanced
set xlabel "time from the step's start (µs)"
set xrange [0:{(t1 - t0) * 1.02:.3f}]
set yrange [{len(rows) - 0.4}:-0.6]
set ytics ({ytics}) noenhanced
set grid xtics lc rgb "#e0e0e0"
set key outside right top vertical noenhanced
plot {", ".join(plots)}
"""


def main(argv):
    ap = Parser(prog=PROG, description="one step of a partrain trace as a Gantt figure (docs/tracing-figures.md)")
    ap.add_argument("trace", metavar="TRACE")
    ap.add_argument("--out", required=True, metavar="PNG")
    ap.add_argument("--step", type=int, default=None, metavar="S")
    ap.add_argument("--title", default=None, metavar="T")
    a = ap.parse_args(argv)
    try:
        other, spans = load(a.trace)
        durations = step_durations(spans)
        step = typical_step(durations) if a.step is None else a.step
        if step not in durations:
            raise TraceError(f"{a.trace}: step {step} was not traced (traced: {min(durations)}..{max(durations)})")
        check_out(a.out)
    except TraceError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        print(f"{PROG}: gnuplot missing (apt-get install gnuplot-nox)", file=sys.stderr)
        return 1
    mark_nesting(spans)
    tmp_png = f"{a.out}.tmp{os.getpid()}.png"
    with tempfile.TemporaryDirectory(prefix="partrain-timeline-") as tmp:
        gp = os.path.join(tmp, "timeline.gp")
        with open(gp, "w") as f:
            f.write(script(spans, step, other, a.title, os.path.join(tmp, "timeline.dat"), tmp_png))
        r = subprocess.run([gnuplot, gp], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           env={**os.environ, "LC_ALL": "C"})
    if r.returncode != 0 or not os.path.isfile(tmp_png) or os.path.getsize(tmp_png) == 0:
        if os.path.exists(tmp_png):
            os.unlink(tmp_png)
        lines = r.stdout.decode(errors="replace").strip().splitlines()
        print(f"{PROG}: gnuplot failed (exit {r.returncode}): {lines[-1] if lines else 'no output'}", file=sys.stderr)
        return 1
    os.replace(tmp_png, a.out)
    print(f"{PROG}: {a.out}: step {step} of {a.trace} ({durations[step]:.1f} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
