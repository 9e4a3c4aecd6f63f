"""
scripts/reporting/header.py — REPORT.md's title (the run's date, or "assembled from N runs"
with the list when the results come from more than one run), its title paragraph (which
run, which mode, what the numbers are; one sentence more when any row was measured
disturbed by other load) and the machine table (DIR/machine.json: what the run had).

One run: the rows' timestamps and DIR/.done stamps (run_all.sh's finished steps) with no gap
over RUN_GAP between consecutive ones; a longer gap starts another run. (The rows' run_id is
one trainer process's, not one run_all.sh run's, so it cannot tell runs apart.)
"""

import datetime
import glob
import json
import os

import partrain
from reporting.common import num, plural, table
from reporting.machine import collect, facts, have_probed

RUN_GAP = datetime.timedelta(hours=6)


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


def parse_stamp(t):
    try:
        return datetime.datetime.strptime(t.strip(), "%Y-%m-%dT%H:%M:%SZ")
    except (AttributeError, ValueError):
        return None


def done_stamps(d):
    """(time, step id) of each DIR/.done/ID (its second line is the time it finished)"""
    out = []
    for p in sorted(glob.glob(os.path.join(d, ".done", "*"))):
        try:
            with open(p, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        t = parse_stamp(lines[1]) if len(lines) > 1 else None
        if t:
            out.append((t, os.path.basename(p)))
    return out


def runs_of(d, rows):
    """the runs the results come from, oldest first: [(first, last, [what])], what being the
    steps (.done) and CSV files whose times fall in the run"""
    events = [(t, r.get("_file", "?")) for r in rows for t in [parse_stamp(r.get("timestamp", ""))] if t]
    events += [(t, f"step {s}") for t, s in done_stamps(d)]
    events.sort()
    runs = []
    for t, what in events:
        if runs and t - runs[-1][1] <= RUN_GAP:
            runs[-1][1] = t
            runs[-1][2].add(what)
        else:
            runs.append([t, t, {what}])
    return [(a, b, sorted(w)) for a, b, w in runs]


def when(a, b):
    fa, fb = a.strftime("%Y-%m-%d %H:%M"), b.strftime("%Y-%m-%d %H:%M")
    if fa == fb:
        return fa + " UTC"
    return f"{fa} … {fb if a.date() != b.date() else b.strftime('%H:%M')} UTC"


def title(d, rows):
    """the heading line and, for results of several runs, the list of them"""
    runs = runs_of(d.i.dir, rows)
    if not runs:
        return "# partrain report (no measurements found)", []
    if len(runs) == 1:
        return f"# partrain report: the run of {when(runs[0][0], runs[0][1])}", []
    listed = [f"- {when(a, b)}: {', '.join(w)}" for a, b, w in runs]
    return (f"# partrain report: assembled from {len(runs)} runs ({runs[0][0]:%Y-%m-%d} … {runs[-1][1]:%Y-%m-%d})",
            [f"The results directory holds {len(runs)} runs (more than {RUN_GAP.seconds // 3600} h apart); "
             "numbers from different runs may have met different load:", ""] + listed + [""])


def read_machine(d):
    """DIR/machine.json as a dict ({} when missing or unreadable)"""
    try:
        with open(os.path.join(d, "machine.json")) as f:
            m = json.load(f)
        return m if isinstance(m, dict) else {}
    except (OSError, ValueError):
        return {}


def run_machine(i):
    """(the machine's dict, whether it was probed now because machine.json lacks it); probed
    once per report"""
    if not hasattr(i, "run_machine"):
        m = read_machine(i.dir)
        if have_probed(m):
            i.run_machine = (m, False)
        else:
            now = collect()
            now.update({k: v for k, v in m.items() if k in ("cores", "nodes", "slots", "cores_from")})
            i.run_machine = (now, True)
    return i.run_machine


def header(d):
    i = d.i
    rows = i.all_rows()
    hosts = sorted({r.get("host", "") for r in rows if r.get("host")})
    mode, why = run_mode(i, rows)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    on = f" on host {', '.join(hosts)}" if hosts else ""
    head, listed = title(d, rows)
    d.add(head, "")
    d.add(*listed)
    d.para(
        f"Generated {now} by `scripts/report.py` from the results directory `{os.path.basename(os.path.abspath(i.dir))}/` "
        f"({plural(len(rows), 'result row')} in "
        f"{plural(len(glob.glob(os.path.join(i.dir, '*.csv'))), 'CSV file')}{on}). Mode: **{mode}** "
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


def machine_table(d):
    """## Machine: what the run had (machine.json), or what this machine is now, said so"""
    i = d.i
    m, probed_now = run_machine(i)
    hosts = sorted({r.get("host", "") for r in i.all_rows() if r.get("host")})
    d.add("## Machine", "")
    d.add(*table(["item", "value"], facts(m, i.machine)), "")
    if probed_now:
        d.para(f"Probed when this report was generated: `machine.json` of the results directory does not describe "
               f"the machine (a run of an older suite, or no run_all.sh run); the measurements come from host(s) "
               f"{', '.join(hosts) or 'unknown'} (CSV column `host`), which may differ.")
    else:
        d.para(f"From the run's `machine.json` (run_all.sh probes the machine when a run starts; "
               f"scripts/machine-info.py); the measurements come from host(s) {', '.join(hosts) or 'unknown'} "
               "(CSV column `host`).")
