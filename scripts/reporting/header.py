"""
scripts/reporting/header.py — REPORT.md's title paragraph (which run, which mode, what the
numbers are; one sentence more when any row was measured disturbed by other load) and the
machine table.
"""

import datetime
import glob
import os

import partrain
from reporting.common import num, plural, table


def run_mode(i, rows):
    """(mode, why): from DIR/mode.txt, else inferred from the data sizes"""
    mt = i.text("mode.txt")
    if mt and mt.split():
        return mt.split()[0], f"from {i.path('mode.txt')}"
    ns = [int(num(r.get("train_n")) or 0) for r in rows]
    if not ns:
        return "unknown", "no result rows to infer it from"
    n = max(ns)
    mode = "full" if n >= 60000 else "quick" if n >= 3000 else "smoke"
    return mode, f"inferred from the data sizes: at most {n:,} training samples per run"


def header(d, facts):
    i = d.i
    rows = i.all_rows()
    stamps = sorted(r.get("timestamp", "") for r in rows if r.get("timestamp"))
    hosts = sorted({r.get("host", "") for r in rows if r.get("host")})
    mode, why = run_mode(i, rows)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    span = f"measured {stamps[0]} … {stamps[-1]}" if stamps else "no measurements found"
    on = f" on host {', '.join(hosts)}" if hosts else ""
    d.add("# partrain report", "")
    d.para(
        f"Generated {now} by `scripts/report.py` from `{i.dir}/` ({plural(len(rows), 'result row')} in "
        f"{plural(len(glob.glob(os.path.join(i.dir, '*.csv'))), 'CSV file')}, {span}{on}). Mode: **{mode}** "
        f"({why}); quick and smoke runs use training subsets and fewer repetitions, so their times are "
        "indicative only. Regenerate everything with `make all && ./run_all.sh` (`--quick` or `--smoke` for "
        "a short run); `make plots` redraws the figures from the CSVs alone and `make report-md` rebuilds "
        "this file from existing results without rerunning anything. Times are medians over repeated runs "
        "(the **runs** columns count them) of each run's median epoch (epochs 2..E, evaluation excluded) "
        "unless a table says otherwise; speedups divide serial's time by the configuration's, "
        "measured in the same sweep.")
    k = partrain.n_disturbed(rows)
    if k:
        d.para(f"{plural(k, 'result row')} of {len(rows)} were measured while other processes loaded the machine: "
               "the benchmark (scripts/lib.sh) found more than its `--max-other` cores (default 0.05) of outside load "
               "during the run and marked the row disturbed (CSV columns `other_load_cores`, `disturbed`); a runs "
               "cell such as \"3 (1 disturbed)\" counts them, and a median that includes them may be slower than "
               "this machine can go.")
    d.add("## Machine", "")
    d.add(*table(["item", "value"], facts), "")
    d.para(f"Probed when this report was generated; the measurements come from host(s) "
           f"{', '.join(hosts) or 'unknown'} (CSV column `host`).")
