"""
scripts/reporting/timings.py — "Which timing is which": the three clocks of the report
(per-epoch median, total_seconds, hyperfine), the rule every cell over repeated runs follows
(reporting/common.py's spread) and how many configurations follow each, where the columns
of wide tables went, hyperfine's whole-process timings, and the OMP_WAIT_POLICY behind
every figure and table.
"""

import glob
import json
import os

from reporting.common import HYPERFINE, MAX_COLUMNS, MLPERF_RUNS, med, num, pct, plural, pol, s

# figure or table -> the CSV it is drawn from
USES = [("openmp-threads.png / Figure 6", "openmp.csv"), ("OpenMP benchmark, seeds 000/004", "bench-openmp.csv"),
        ("hybrid grid, seed 001 Table 4", "hybrid-grid.csv"), ("hybrid benchmark, seed 000 Table 1", "bench-hybrid.csv"),
        ("CNN Table 4 / speedup figure", "cnn-timing.csv"), ("CNN Tables 3, 5", "cnn-accuracy.csv"),
        ("CNN vs PyTorch", "bench-cnn.csv"), ("image size, seed 002", "imagesize.csv"),
        ("MPI strong scaling", "mpi-strong.csv"), ("MPI weak scaling", "mpi-weak.csv"),
        ("pipeline bubble", "mpi-pipeline.csv"), ("MPI benchmark", "bench-mpi.csv")]


def timings(d):
    i = d.i
    d.add("## Which timing is which", "")
    d.para("Three different clocks appear in this report. **Per-epoch median** (`epoch_seconds_median`, "
           "every table above unless it says otherwise): the training time of one epoch, median of epochs "
           "2..E (epoch 1 only when E = 1), test evaluation excluded, taken inside the trainer. "
           "**total_seconds**: the trainer's whole training loop, first epoch and per-epoch test evaluation "
           "included (seed report 003's Table 4 uses it, like the report's \"total training time\"). "
           "**hyperfine**: the whole process from the outside — start-up, `mpirun`, reading and decompressing "
           "the data, training, evaluation — mean ± standard deviation over its runs after warm-up.")
    d.para(f"**Repeated runs.** A cell over n runs of one configuration follows one rule: n < {MLPERF_RUNS}, the "
           f"median, with the min–max of the n runs in parentheses; n ≥ {MLPERF_RUNS}, MLPerf's: the fastest and the "
           "slowest run dropped, the mean of the other n − 2, with the range of those kept. The table's runs (or "
           "rounds) column gives n. A speedup or ratio is the ratio of the two central values; its range is that of "
           "the per-round ratios where both configurations were measured in the same benchmark rounds "
           "(bench-*.csv: every serial row of a batch starts a round, the configurations after it ran in it), and "
           "there is none for the sweeps (openmp.csv, mpi-*.csv, hybrid-grid.csv, imagesize.csv), whose runs are "
           f"not paired in rounds. {run_counts(i.all_rows())}")
    d.para(f"A table wider than {MAX_COLUMNS} columns shows the {MAX_COLUMNS} that answer its section's question; "
           "the line \"all columns:\" under it links the CSV with every column (report-tables/ of the results "
           "directory).")
    files = sorted(glob.glob(os.path.join(i.dir, "hyperfine-*.json")))
    have = {os.path.basename(p) for p in files}
    gone = [f"hyperfine-{t}.json" for t in HYPERFINE if f"hyperfine-{t}.json" not in have]
    if gone:
        d.add(*[f"- {i.missing(n)}" for n in gone], "")
    sent = hyperfine(d, files)
    sent += overhead(i.all_rows())
    sent += wait_policy(d)
    d.shows(sent)


CONFIG_KEYS = ("_file", "program", "variant", "ranks", "threads", "batch", "dataset", "train_n", "hidden", "epochs",
               "image_size")


def run_counts(rows):
    """the sentence: how many configurations of this run's CSVs follow each rule"""
    n = {}
    for r in rows:
        k = tuple(r.get(c) for c in CONFIG_KEYS)
        n[k] = n.get(k, 0) + 1
    if not n:
        return ""
    many = sum(1 for v in n.values() if v >= MLPERF_RUNS)
    few = sum(1 for v in n.values() if 1 < v < MLPERF_RUNS)
    one = sum(1 for v in n.values() if v == 1)
    return (f"In this run's CSVs, {plural(many, 'configuration')} had at least {MLPERF_RUNS} runs (MLPerf's rule), "
            f"{few} had 2–{MLPERF_RUNS - 1} (median, min–max) and {one} had one (its value alone).")


def hyperfine(d, files):
    """the table of hyperfine's runs; the sentence about their spread"""
    body, spreads = [], []
    for p in files:
        try:
            with open(p) as f:
                res = json.load(f).get("results", [])
        except (OSError, ValueError) as e:
            d.para(f"`{p}`: unreadable ({e}).")
            continue
        for r in res:
            times = r.get("times") or []
            mean, sd = num(r.get("mean")), num(r.get("stddev"))
            body.append([os.path.basename(p), f"`{r.get('command', '?')}`", str(len(times)),
                         f"{s(mean)} ± {s(sd)}" if sd is not None else f"{s(mean)} (one run: no σ)",
                         s(num(r.get("min"))), s(num(r.get("max"))), s(med(num(t) for t in times))])
            if mean and sd is not None:
                spreads.append((100 * sd / mean, r.get("command", "?"), mean))
    if body:
        d.table(["file", "command", "runs", "mean ± σ", "min", "max", "median"], body)
    if not spreads:
        return []
    hi = max(spreads)
    return [f"hyperfine's run-to-run spread is at most {pct(hi[0], 1)} of the mean (`{hi[1]}`, {s(hi[2])})."]


def overhead(rows):
    """how much total_seconds exceeds epochs x the per-epoch median, over every CSV row"""
    over = []
    for r in rows:
        e, t, n = num(r.get("epoch_seconds_median")), num(r.get("total_seconds")), num(r.get("epochs"))
        if e and t and n:
            over.append(100 * (t / (n * e) - 1))
    if not over:
        return []
    return [f"Over the {len(over)} CSV rows, total_seconds exceeds epochs × per-epoch median by a median "
            f"{pct(med(over), 0)} (range {pct(min(over), 0)} … {pct(max(over), 0)}): the first epoch and "
            f"the test evaluations."]


def workers(r):
    return int(num(r.get("ranks")) or 1) * int(num(r.get("threads")) or 1)


def wait_policy(d):
    """OMP_WAIT_POLICY per figure and table, within and above the cores"""
    # the policy follows the cores the runs really had (machine.json's real_cores: a run
    # with --cores N above them still shares the real ones), not the cores the sweeps assumed
    i, cores = d.i, d.i.machine.get("real_cores", d.cores)
    body, bad = [], []
    for what, name in USES:
        rs = i.rows(name)
        if not rs:
            continue
        by = {}
        for r in rs:
            w = workers(r)
            by.setdefault("≤ cores" if w <= cores else "> cores", set()).add(pol(r.get("omp_wait_policy", "")))
            if w > cores and int(num(r.get("threads")) or 1) > 1 and not r.get("omp_wait_policy"):
                bad.append(f"{name}: {r.get('program')} {r.get('variant')} {r.get('ranks')}×{r.get('threads')}")
        body.append([what, name] + [",".join(sorted(by.get(k, set()))) or "–" for k in ("≤ cores", "> cores")])
    if not body:
        return []
    d.add(f"OMP_WAIT_POLICY per figure and table (from the CSV column `omp_wait_policy`; \"unset\" = the "
          f"OpenMP runtime's default, which spins before sleeping), split by ranks × threads against the "
          + (f"{cores} cores:" if cores == d.cores else
             f"cores the runs really had (nproc {cores}; the sweeps assumed {d.cores}, machine.json):"), "")
    d.table(["figure / table", "source", f"ranks × threads ≤ {cores}", f"ranks × threads > {cores}"], body)
    if bad:
        return [f"{len(bad)} oversubscribed threaded run(s) had OMP_WAIT_POLICY unset (spinning waits "
                f"starve the threads that have work; their times are pessimistic): "
                + "; ".join(bad[:5]) + ("…" if len(bad) > 5 else "") + "."]
    return ["Every threaded run with more ranks × threads than cores used OMP_WAIT_POLICY=passive; "
            "runs within the cores used the runtime's default."]
