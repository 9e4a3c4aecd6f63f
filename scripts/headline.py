#!/usr/bin/env python3
"""
scripts/headline.py — the points of the report's headline figure (plots/headline.gp):
speedup against workers for every strategy family, from scripts/reporting/firstpage.py's
headline_points() (the same numbers as the first page's table).

  headline.py DIR --outdir OUTDIR
Writes OUTDIR/headline-FAMILY.dat ("workers speedup bound", bound "?" where no benchmark
measured it) and prints shell assignments for scripts/plot.sh: headline_families='...'
headline_batch='openmp, mpi at batch 64; cnn at batch 32' headline_max=N headline_bounds=0|1 (whether any bound was measured). Exit 0; 1 when no family has data; 2 on a usage error
or a file that cannot be written.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reporting.common import Inputs  # noqa: E402
from reporting.firstpage import headline_points  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser(prog="headline.py")
    ap.add_argument("results")
    ap.add_argument("--outdir", required=True)
    a = ap.parse_args(argv)
    pts = headline_points(Inputs(a.results, a.results, os.path.join(a.results, "REPORT.md")))
    if not pts:
        return 1
    try:
        for fam, p in pts.items():
            with open(os.path.join(a.outdir, f"headline-{fam}.dat"), "w") as f:
                f.write(f"# {fam}: workers speedup bound (batch {p['batch']}, from {p['csv']})\n")
                for w, sp, bound, _ in p["points"]:
                    f.write(f"{w} {sp:.4f} {'?' if bound is None else f'{bound:.4f}'}\n")
    except OSError as e:
        print(f"headline.py: {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    by_batch = {}
    for fam, p in pts.items():
        by_batch.setdefault(p["batch"], []).append(fam)
    batches = "; ".join(f"{', '.join(f)} at batch {b}" for b, f in sorted(by_batch.items(), key=lambda kv: int(kv[0])))
    top = max(w for p in pts.values() for w, _, _, _ in p["points"])
    bounds = int(any(b is not None for p in pts.values() for _, _, b, _ in p["points"]))
    print(f"headline_families='{' '.join(pts)}' headline_batch='{batches}' headline_max={top} headline_bounds={bounds}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
