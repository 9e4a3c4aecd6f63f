#!/usr/bin/env bash
# tests/test_trace_scripts.sh — the scripts that read the trainers' --trace files:
# scripts/trace_summary.py (per-rank summary, --json, --csv), scripts/timeline.py (one step
# as a PNG), scripts/plot.sh's timelines figure and the report's Timelines section.
#
# On synthetic traces of the format (tests/trace_fixture.py): a rank slowed on purpose is
# named by the "waited for" line (rank 1 of 2, rank 0 of 3), balanced ranks are not, known
# seconds and synchronisation counts come out, nested spans are not counted twice (an MPI
# call inside a wait is one synchronisation); bad
# inputs (missing file, not JSON, not a partrain trace, a broken event, no step) end with
# exit 2, one line naming the file, nothing written; timeline.py draws a valid PNG of the
# median-duration step after the first 10, refuses an untraced step, a symlink and an
# existing file that is not a PNG, and aligns a rank whose clock started late. Then a
# real 2-rank mpi/mpi run with PARTRAIN_SLOW_RANK=1:2000 (docs/testing.md#test-hooks)
# whose summary must name rank 1 (skipped, with the reason, when mpi/mpi has no --trace
# or mpirun is missing).
# No timings are asserted.
set -u
cd "$(dirname "$0")/.." || exit 2
. tests/lib.sh
. scripts/lib.sh    # PARTRAIN_PYTHON
[ -x "$PY" ] || PY=python3
command -v "$PY" >/dev/null || { skip trace-scripts "python3 missing"; exit 0; }
FX=("$PY" tests/trace_fixture.py)
SUM=("$PY" scripts/trace_summary.py)

# ---- the summary on fixtures
"${FX[@]}" "$TMP/slow1.json" --ranks 2 --slow-rank 1:2000 --nested
got=$("${SUM[@]}" "$TMP/slow1.json" 2>&1); rc=$?
check "summary: a slowed rank 1 of 2 is named" "exit $rc: $(tail -n 1 <<<"$got")" \
  eval '[ $rc = 0 ] && grep -qE "^waited for: rank 1 \(compute [0-9]+ % above the median rank; others waited 0\.0[0-9]+ s\)$" <<<"$got"'
"${FX[@]}" "$TMP/slow0.json" --ranks 3 --slow-rank 0:500
got=$("${SUM[@]}" "$TMP/slow0.json" 2>&1)
check "summary: a slowed rank 0 of 3 is named" "$(tail -n 1 <<<"$got")" grep -q '^waited for: rank 0 (' <<<"$got"
"${FX[@]}" "$TMP/even.json" --ranks 3
got=$("${SUM[@]}" "$TMP/even.json" 2>&1)
check "summary: balanced ranks name nobody" "$(tail -n 1 <<<"$got")" grep -qx 'waited for: none (ranks balanced within 5 %)' <<<"$got"
"${FX[@]}" "$TMP/omp.json" --ranks 1 --threads 2 --program openmp --variant critical
got=$("${SUM[@]}" "$TMP/omp.json" 2>&1)
check "summary: one rank with a worker thread: the thread's line, nobody waited for" "$got" \
  eval 'grep -q "^rank 0 thread 1: compute 0\.[0-9]* s, wait 0\.[0-9]* s$" <<<"$got" && grep -qx "waited for: none (one rank)" <<<"$got"'
# the numbers: 30 steps; rank 1 computes 2000 us more per step; the Allreduce (10 us + the
# wait) and the nested MPI_Testall are the 2 synchronisations; nested spans are not counted
# twice, so the top-level spans cover the step (other ~ 0)
nums=$("${SUM[@]}" "$TMP/slow1.json" --json | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
r0, r1 = d["rank_summaries"]
ok = (r0["steps"] == r1["steps"] == 30 and abs((r1["compute_s"] - r0["compute_s"]) - 30 * 2000e-6) < 1e-6
      and r0["syncs_per_step"] == 2 and abs(r0["comm_s"] - 30 * 2010e-6) < 1e-6 and abs(r1["comm_s"] - 30 * 10e-6) < 1e-6
      and all(abs(r["other_s"]) < 1e-6 for r in (r0, r1)) and d["waited_for"]["rank"] == 1
      and abs(d["waited_for"]["others_waited_s"] - 30 * 2000e-6) < 1e-6)
print("ok" if ok else json.dumps(d["rank_summaries"])[:400])' 2>&1)
check "summary --json: known seconds, 2 syncs per step, nested spans counted once" "$nums" [ "$nums" = ok ]
# a wait with an MPI call nested inside: one synchronisation, the time once (as wait)
"${FX[@]}" "$TMP/shm.json" --ranks 2 --sync-wait
nums=$("${SUM[@]}" "$TMP/shm.json" --json | "$PY" -c '
import json, sys
r0 = json.load(sys.stdin)["rank_summaries"][0]
print("ok" if r0["syncs_per_step"] == 1 and r0["comm_s"] == 0 and abs(r0["wait_s"] - 30 * 10e-6) < 1e-6 else r0)' 2>&1)
check "summary: an MPI call nested in a wait span is one synchronisation, counted as wait" "$nums" [ "$nums" = ok ]
"${SUM[@]}" --csv "$TMP/sum.csv" "$TMP/slow1.json" "$TMP/omp.json" >/dev/null 2>&1; rc=$?
rows=$(awk -F, 'NR > 1 { print $1 ":" $7 ":" $18 }' "$TMP/sum.csv" 2>/dev/null | paste -sd' ')
check "summary --csv: one row per trace x rank, the waited-for rank in each" "exit $rc, rows '$rows'" \
  [ "$rows" = "slow1:0:1 slow1:1:1 omp:0:none" ]

# ---- bad inputs: exit 2, one line naming the file, nothing written
bad() {   # NAME FILE KEY
  local file=$2 key=$3 rc
  "${SUM[@]}" --csv "$TMP/bad.csv" "$TMP/even.json" "$file" >/dev/null 2>"$TMP/err"; rc=$?
  check "summary: $1: exit 2, one line naming the file, no CSV" "exit $rc, $(wc -l <"$TMP/err") line(s): $(head -c 200 "$TMP/err")" \
    eval '[ $rc = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ] && grep -qF -- "$file" "$TMP/err" && grep -q -- "$key" "$TMP/err" && [ ! -e "$TMP/bad.csv" ]'
}
bad "missing file" "$TMP/none.json" "no such file"
printf '{"partrain_trace":1, "otherData": {' >"$TMP/torn.json"; bad "torn JSON" "$TMP/torn.json" "not JSON"
echo 'hello' >"$TMP/text.json"; bad "not JSON" "$TMP/text.json" "not JSON"
echo '{"traceEvents": []}' >"$TMP/chrome.json"; bad "a Chrome trace that is not partrain's" "$TMP/chrome.json" "not a partrain trace"
sed 's/"ph":"X"/"ph":"B"/' "$TMP/even.json" >"$TMP/begin.json"; bad "a begin event" "$TMP/begin.json" "ph 'B'"
sed '0,/"cat":"compute"/s//"cat":"gpu"/' "$TMP/even.json" >"$TMP/cat.json"; bad "an unknown cat" "$TMP/cat.json" "cat 'gpu'"
sed '0,/"dur":[0-9.]*/s//"dur":-1/' "$TMP/even.json" >"$TMP/dur.json"; bad "a negative dur" "$TMP/dur.json" "dur >= 0"
grep -v '"cat":"step"' "$TMP/even.json" | sed '$s/,$/]}/' >"$TMP/nostep.json"; bad "no step span" "$TMP/nostep.json" "no training step"
"${SUM[@]}" >/dev/null 2>"$TMP/err"; rc=$?
check "summary: no FILE is a usage error (exit 2, one line)" "exit $rc: $(cat "$TMP/err")" eval '[ $rc = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ]'

# ---- timeline.py
png_ok() { "$PY" -c '
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
assert len(b) > 1000 and b[:8] == b"\x89PNG\r\n\x1a\n"
i, kinds = 8, []
while i < len(b):
    n, kind = struct.unpack(">I4s", b[i:i + 8])
    assert zlib.crc32(kind + b[i + 8:i + 8 + n]) & 0xffffffff == struct.unpack(">I", b[i + 8 + n:i + 12 + n])[0]
    kinds.append(kind); i += 12 + n
assert i == len(b) and kinds[0] == b"IHDR" and kinds[-1] == b"IEND"
w, h = struct.unpack(">II", b[16:24]); assert w >= 400 and h >= 250' "$1" 2>/dev/null; }
if command -v gnuplot >/dev/null; then
  "${FX[@]}" "$TMP/hyb.json" --ranks 2 --threads 2 --nested --steps 40
  got=$("$PY" scripts/timeline.py "$TMP/hyb.json" --out "$TMP/hyb.png" 2>&1); rc=$?
  check "timeline: a valid PNG of a 2 x 2 fixture" "exit $rc: $got" eval '[ $rc = 0 ] && png_ok "$TMP/hyb.png"'
  # the typical step: the median duration (lower median) among steps 10.. (read independently)
  want=$("$PY" -c '
import json, statistics, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
dur = {}
for e in ev:
    if e.get("cat") == "step":
        dur[e["args"]["step"]] = max(dur.get(e["args"]["step"], 0), e["dur"])
later = [s for s in sorted(dur) if s >= 10]
m = statistics.median_low(dur[s] for s in later)
print(min(s for s in later if dur[s] == m))' "$TMP/hyb.json")
  check "timeline: draws the median-duration step after the first 10 (step $want)" "$got" grep -q ": step $want of " <<<"$got"
  # a rank whose clock started 5 ms late: the figure aligns it (the offset found exactly)
  "${FX[@]}" "$TMP/late.json" --ranks 2 --clock-offset 1:5000
  off=$("$PY" -c '
import sys
sys.path.insert(0, "scripts")
import timeline, trace_summary
print(timeline.clock_offsets(trace_summary.load(sys.argv[1])[1]))' "$TMP/late.json" 2>&1)
  check "timeline: a rank's clock 5 ms late is aligned (offsets {0: 0.0, 1: -5000.0})" "got $off" [ "$off" = "{0: 0.0, 1: -5000.0}" ]
  "$PY" scripts/timeline.py "$TMP/hyb.json" --out "$TMP/s3.png" --step 3 --title 'a title' >/dev/null 2>&1; rc=$?
  check "timeline --step 3 --title: a PNG" "exit $rc" eval '[ $rc = 0 ] && png_ok "$TMP/s3.png"'
  "$PY" scripts/timeline.py "$TMP/hyb.json" --out "$TMP/s99.png" --step 99 >/dev/null 2>"$TMP/err"; rc=$?
  check "timeline: an untraced step: exit 2, one line, no PNG" "exit $rc: $(cat "$TMP/err")" \
    eval '[ $rc = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ] && grep -q "step 99 was not traced" "$TMP/err" && [ ! -e "$TMP/s99.png" ]'
  echo 'my notes' >"$TMP/notes.txt"
  "$PY" scripts/timeline.py "$TMP/hyb.json" --out "$TMP/notes.txt" >/dev/null 2>"$TMP/err"; rc=$?
  check "timeline: an existing file that is not a PNG is refused and kept" "exit $rc: $(cat "$TMP/err")" \
    eval '[ $rc = 2 ] && [ "$(cat "$TMP/notes.txt")" = "my notes" ]'
  ln -s "$TMP/hyb.png" "$TMP/link.png"
  "$PY" scripts/timeline.py "$TMP/hyb.json" --out "$TMP/link.png" >/dev/null 2>"$TMP/err"; rc=$?
  check "timeline: a symlink --out is refused" "exit $rc: $(cat "$TMP/err")" eval '[ $rc = 2 ] && grep -q "symbolic link" "$TMP/err"'
  "$PY" scripts/timeline.py "$TMP/chrome.json" --out "$TMP/c.png" >/dev/null 2>"$TMP/err"; rc=$?
  check "timeline: not a partrain trace: exit 2, no PNG" "exit $rc" eval '[ $rc = 2 ] && [ ! -e "$TMP/c.png" ]'
  # scripts/plot.sh: one figure per DIR/traces/NAME.json
  mkdir -p "$TMP/res/traces"
  cp "$TMP/slow1.json" "$TMP/res/traces/mpi-allreduce.json"; cp "$TMP/omp.json" "$TMP/res/traces/openmp-critical.json"
  scripts/plot.sh --results "$TMP/res" --plots "$TMP/plots" --only timelines >"$TMP/plot.out" 2>&1; rc=$?
  check "plot.sh --only timelines: timeline-NAME.png per trace" "exit $rc: $(tail -n 2 "$TMP/plot.out")" \
    eval '[ $rc = 0 ] && png_ok "$TMP/plots/timeline-mpi-allreduce.png" && png_ok "$TMP/plots/timeline-openmp-critical.png"'
  scripts/plot.sh --results "$TMP/empty" --plots "$TMP/plots" --only timelines >"$TMP/plot.out" 2>&1; rc=$?
  check "plot.sh --only timelines without traces: the skipped line" "exit $rc: $(cat "$TMP/plot.out")" \
    eval '[ $rc = 0 ] && grep -q "^plot: skipped timeline-\*.png: " "$TMP/plot.out"'
else
  skip "timeline.py and plot.sh --only timelines" "gnuplot missing (apt-get install gnuplot-nox)"
fi

# ---- the report's Timelines section
mkdir -p "$TMP/res" "$TMP/plots"
"${SUM[@]}" --csv "$TMP/res/trace-summary.csv" "$TMP/res/traces/mpi-allreduce.json" "$TMP/res/traces/openmp-critical.json" \
  >/dev/null 2>&1 || cp "$TMP/sum.csv" "$TMP/res/trace-summary.csv"
"$PY" scripts/report.py --results "$TMP/res" --plots "$TMP/plots" --out "$TMP/res/REPORT.md" >/dev/null 2>"$TMP/err"; rc=$?
sec=$(sed -n '/^## Timelines/,/^## Performance model/p' "$TMP/res/REPORT.md" 2>/dev/null)
check "report: the Timelines section, rank 1's row (compute 2154.1 us per step, 2.0 syncs)" "exit $rc: $(head -c 300 <<<"$sec")" \
  eval '[ $rc = 0 ] && grep -qF "| 1 | 2176.1 | 2154.1 | 10.0 | 0.0 | 8.0 | 2.0 |" <<<"$sec"'
check "report: 'What this shows' names the rank the others waited for" "$(grep 'What this shows' <<<"$sec")" \
  grep -qF 'waited for one rank in mpi-allreduce (rank 1)' <<<"$sec"
mkdir -p "$TMP/nores"
printf 'timelines\tmpi/mpi has no --trace\n' >"$TMP/nores/skipped.txt"
"$PY" scripts/report.py --results "$TMP/nores" --plots "$TMP/nores" --out "$TMP/nores/REPORT.md" >/dev/null 2>&1
check "report: no trace-summary.csv: the 'not measured' line with the step's reason" "$(grep -F trace-summary "$TMP/nores/REPORT.md")" \
  grep -qF "not measured in this run: trace-summary.csv missing (step timelines skipped: mpi/mpi has no --trace)" "$TMP/nores/REPORT.md"

# ---- run_all.sh knows the step
check "run_all --list-steps --only trace: timelines, plots, report" "$(./run_all.sh --list-steps --only trace | paste -sd' ')" \
  [ "$(./run_all.sh --list-steps --only trace | paste -sd' ')" = "timelines plots report" ]

# ---- a real run: rank 1 slowed by 2000 us per step
if ! [ -x mpi/mpi ]; then
  skip "real 2-rank trace with PARTRAIN_SLOW_RANK=1:2000" "mpi/mpi not built (make all)"
elif ! mpi/mpi --help 2>&1 | grep -q -- '--trace '; then
  skip "real 2-rank trace with PARTRAIN_SLOW_RANK=1:2000" "mpi/mpi has no --trace (a build from before issue 32)"
elif ! command -v mpirun >/dev/null; then
  skip "real 2-rank trace with PARTRAIN_SLOW_RANK=1:2000" "mpirun not found (apt-get install openmpi-bin)"
else
  PARTRAIN_SLOW_RANK=1:2000 timeout $((120 * SLOWDOWN)) scripts/mpirun.sh 2 mpi/mpi --data data/mnist --train 1280 --test 100 \
    --epochs 1 --batch 64 --quiet --csv none --trace "$TMP/real.json" --trace-steps 15 >"$TMP/real.out" 2>&1; rc=$?
  got=$("${SUM[@]}" "$TMP/real.json" 2>&1)
  check "real 2-rank mpi/mpi run, PARTRAIN_SLOW_RANK=1:2000: the summary names rank 1" \
    "exit $rc ($(tail -n 1 "$TMP/real.out")): $(tail -n 1 <<<"$got")" eval '[ $rc = 0 ] && grep -q "^waited for: rank 1 (" <<<"$got"'
fi
# ---- bench/trace-pair.sh: bad inputs, then a real pair whose before side is slowed
expect_error "trace-pair: no --name" "--name" bench/trace-pair.sh --before-env A=1 -- serial/serial
expect_error "trace-pair: nothing differs" "nothing differs" bench/trace-pair.sh --name p -- serial/serial
expect_error "trace-pair: no trainer in LAUNCH" "none of the trainers" bench/trace-pair.sh --name p --before-env A=1 -- true
expect_error "trace-pair: --before-env not K=V" "not K=V" bench/trace-pair.sh --name p --before-env "x" -- serial/serial
mkdir -p "$TMP/pairs" && echo '{"mine":1}' >"$TMP/pairs/p-before.json"
expect_error "trace-pair: an existing file that is not a trace" "not a partrain trace" \
  bench/trace-pair.sh --name p --out "$TMP/pairs" --before-env A=1 -- serial/serial
check "trace-pair: the foreign file untouched" "" [ "$(cat "$TMP/pairs/p-before.json")" = '{"mine":1}' ]
rm -f "$TMP/pairs/p-before.json"
timeout $((120 * SLOWDOWN)) bench/trace-pair.sh --name p --out "$TMP/pairs" --data data/mnist --train 640 \
  --before-env "PARTRAIN_SLOW_RANK=0:400" -- serial/serial >"$TMP/pair.out" 2>&1; rc=$?
check "trace-pair: a real pair (exit 0, two traces, two figures)" "exit $rc: $(tail -n 3 "$TMP/pair.out")" \
  eval '[ $rc = 0 ] && [ -s "$TMP/pairs/timeline-p-before.png" ] && [ -s "$TMP/pairs/timeline-p-after.png" ] &&
        "$PY" tests/check_trace.py "$TMP/pairs/p-before.json" 1 1 >/dev/null && "$PY" tests/check_trace.py "$TMP/pairs/p-after.json" 1 1 >/dev/null'
check "trace-pair: only the before side got --before-env (its steps hold the 400 us slowdown span, the after side's none)" "" \
  "$PY" -c '
import json, sys
def slow(f): return [e["dur"] for e in json.load(open(f))["traceEvents"] if e.get("name") == "slowdown"]
b, a = slow(sys.argv[1]), slow(sys.argv[2])
sys.exit(not (b and min(b) >= 400 and not a))' "$TMP/pairs/p-before.json" "$TMP/pairs/p-after.json"
finish
