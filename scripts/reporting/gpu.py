"""
scripts/reporting/gpu.py — the GPU section of REPORT.md, from scripts/gpu-check.sh's
results (DIR/gpu/summary.csv: one row per check, sanitizer run and timed kernel), with
seed report 000's CUDA epoch (0.23 s for its 15,000 images per machine) beside ours.
The same tables are what gpu-check prints and writes as DIR/gpu/table.md (there the timing
table has all its columns; the report shows seven and links them all as DIR/report-tables/gpu-timing.csv):
  python3 scripts/reporting/gpu.py --table SUMMARY.csv [--what DATA]   (markdown on stdout)
"""

import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from seeds import SEED000, seed000_row  # noqa: E402

SEED_IMAGES = SEED000["images_per_machine"]   # what its 0.23 s per epoch covered


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def tables(rows, what="Fashion-MNIST", images=60000, with_timing=True):
    """markdown lines: device, equivalence, sanitizer and (WITH_TIMING) timing tables"""
    out = []
    dev = next((r for r in rows if r["section"] == "device"), None)
    if dev:
        out += [f"Device: {dev['name']} ({dev['detail']}).", ""]
    eq = [r for r in rows if r["section"] == "equivalence"]
    if eq:
        out += ["Equivalence with serial (per-epoch loss within 1e-4 relative; `+graph` also bit-identical "
                "to the plain launch path):", ""]
        out += md_table(["run", "result", "max rel diff", "detail"],
                        [(r["name"], r["status"], r["max_rel_diff"] or "-", r["detail"] or "") for r in eq]) + [""]
    san = [r for r in rows if r["section"] == "sanitizer"]
    if san:
        out += ["compute-sanitizer (small run of every kernel):", ""]
        out += md_table(["kernel and tool", "result", "detail"], [(r["name"], r["status"], r["detail"]) for r in san]) + [""]
    if with_timing:
        head, body = timing_table(rows, images)
        if body:
            out += timing_caption(what) + md_table(head, body) + [""]
    return out


TIMING_KEEP = ("kernel", "epoch s", "epoch s, --graph", f"s per {SEED_IMAGES:,} images", "GFLOP/s", "x cublas",
               "test acc")   # the report's columns; the graph speed-up and samples/s follow from them


def timing_caption(what):
    return [f"Epoch time, {what}, batch 64, 784-256-128-10 (median of epochs 2..E, median over the runs):", ""]


def timing_table(rows, images=60000):
    """the timed kernels: (header, body); body is empty when there is no timing row"""
    tim = {r["name"]: r for r in rows if r["section"] == "timing"}
    head = ["kernel", "epoch s", "epoch s, --graph", "graph speed-up", f"s per {SEED_IMAGES:,} images", "samples/s",
            "GFLOP/s", "x cublas", "test acc"]
    body = []
    if tim:
        kernels = [n for n in tim if not n.endswith("+graph")]
        cub = num(tim.get("cublas", {}).get("epoch_seconds"))
        seed, _ = seed000_row("cuda")
        for k in kernels:
            p, g = tim[k], tim.get(k + "+graph", {})
            tp, tg = num(p.get("epoch_seconds")), num(g.get("epoch_seconds"))
            body.append((k, f"{tp:.4f}" if tp else p["status"], f"{tg:.4f}" if tg else g.get("status", "-"),
                         f"{tp / tg:.2f}x" if tp and tg else "-",
                         f"{tp * SEED_IMAGES / images:.4f}" if tp else "-",
                         f"{num(p.get('samples_per_second')):,.0f}" if tp else "-",
                         f"{num(p.get('gflops')):.1f}" if tp else "-",
                         f"{tp / cub:.2f}" if tp and cub else "-",
                         f"{num(p.get('test_accuracy')):.2f}%" if tp else "-"))
        body.append(("seed report 000, CUDA only", "-", "-", "-", f"{seed:.2f}", "-", "-", "-", "-"))
    return head, body


def gpu(d):
    """REPORT.md's GPU section (only when DIR/gpu/summary.csv exists)"""
    path = os.path.join(d.i.dir, "gpu", "summary.csv")
    if not os.path.isfile(path):
        return
    rows = read(path)
    d.add("## GPU", "")
    d.para("scripts/gpu-check.sh on a GPU machine (DIR/gpu/: summary.csv, table.md, runs.csv, "
           "gpu-check.log): every kernel checked against serial, with and without `--graph`, under "
           "compute-sanitizer, and timed.")
    d.add(*tables(rows, with_timing=False))
    head, body = timing_table(rows)
    if body:
        d.add(*timing_caption("Fashion-MNIST"))
        d.table(head, body, "gpu-timing", keep=TIMING_KEEP)
    fails = [r["name"] for r in rows if r["status"] == "FAIL"]
    tim = {r["name"]: num(r["epoch_seconds"]) for r in rows if r["section"] == "timing"}
    best = min((t, n) for n, t in tim.items() if t) if any(tim.values()) else None
    seed, _ = seed000_row("cuda")
    d.shows([f"{len(fails)} check(s) failed: {', '.join(fails)}." if fails else "Every check passed.",
             f"The fastest is {best[1]} at {best[0]:.4f} s per 60,000-image epoch, "
             f"{best[0] * SEED_IMAGES / 60000:.4f} s per {SEED_IMAGES:,} images against seed report 000's "
             f"{seed:.2f} s." if best else ""])


def main(argv):
    ap = argparse.ArgumentParser(prog="gpu.py", description="gpu-check's summary.csv as markdown tables")
    ap.add_argument("--table", required=True, metavar="SUMMARY.csv")
    ap.add_argument("--what", default="data/fashion")
    ap.add_argument("--images", type=int, default=60000, help="training images per timed epoch")
    a = ap.parse_args(argv)
    print("\n".join(tables(read(a.table), a.what, a.images)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
