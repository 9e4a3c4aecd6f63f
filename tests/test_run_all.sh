#!/usr/bin/env bash
# tests/test_run_all.sh — ./run_all.sh --smoke end to end, interrupted and resumed.
#
#   1. `./run_all.sh --smoke --no-setup --results DIR` is started and interrupted with
#      SIGINT in the middle of its step mpi-sweep (once its staged mpi-strong.csv, in
#      DIR/.partial/mpi-sweep/, has 2 rows): it must exit 130 with "interrupted at
#      step k", leave no process of the step behind, and not stamp step k as done.
#   2. The same command again: steps 1..k-1 are "done earlier, skipped" (a step skipped
#      for its reason, e.g. no PyTorch, is never stamped and is skipped again), step k is
#      the first that runs, exit 0.
#   0. `./run_all.sh --list-steps` prints the step ids, runs nothing and writes nothing.
#   3. The outputs: every expected CSV (PyTorch's only when $PARTRAIN_PYTHON — scripts/lib.sh
#      — imports torch, else a skipped.txt line), hyperfine JSON per trainer (or a skipped.txt line
#      when hyperfine is missing), PNG and REPORT.md exists and is non-empty; the PNGs are
#      valid (signature, IHDR first, IEND last, every chunk's CRC); REPORT.md has the
#      section headings of scripts/report.py, the first page first, every link resolving
#      and no absolute path (tests/check_links.py); machine.json has every probed field
#      (scripts/machine-info.py); every CSV has exactly the header
#      RESULTS_HEADER of common/results.h (a benchmark's CSV: followed by scripts/lib.sh's
#      other_load_cores,disturbed; comm.csv and trace-summary.csv: their own), rows of the same width, no duplicate run_id,
#      no duplicate row, and no file mixing rows of the interrupted and the resumed run
#      (the interrupted step's partial rows were removed before it was redone);
#      skipped.txt lines are "STEP<TAB>reason", and the cuda step is there with its
#      reason when no GPU works; every step stamped done is one --list-steps printed.
#   4. Resume: a third run skips every step ("done earlier", or skipped again for a
#      reason in skipped.txt) and leaves every CSV and JSON byte-identical.
#   Usage errors exit 2. The test uses data/mnist only (the smoke mode); about 1-2
#   minutes on 2 cores. It needs mpirun (or fails when PARTRAIN_REQUIRE_MPI=1, as in CI)
#   and gnuplot; without them it is skipped with the reason.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
. scripts/lib.sh    # PARTRAIN_PYTHON
LIMIT=$((400 * SLOWDOWN)) # seconds after which a run_all.sh run counts as hung

if ! command -v mpirun >/dev/null; then
  if [ "${PARTRAIN_REQUIRE_MPI:-0}" = 1 ]; then
    fail "run_all.sh --smoke" "mpirun not found but PARTRAIN_REQUIRE_MPI=1 (apt-get install openmpi-bin libopenmpi-dev)"
  else
    skip "run_all.sh --smoke" "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"
  fi
  finish
fi
command -v gnuplot >/dev/null || { skip "run_all.sh --smoke" "gnuplot not found (apt-get install gnuplot-nox)"; finish; }
[ -d data/mnist ] || { skip "run_all.sh --smoke" "data/mnist missing (make data)"; finish; }
for b in serial/serial openmp/openmp mpi/mpi mpi/pipeline hybrid/hybrid cnn/cnn; do
  [ -x $b ] || fail "$b built" "missing (make all)"
done
[ "$FAILS" -eq 0 ] || finish

# ---- usage errors
./run_all.sh --quick --smoke >/dev/null 2>&1; rc=$?
check "run_all: --quick with --smoke is a usage error" "exit $rc, expected 2" [ $rc -eq 2 ]
./run_all.sh --only serial,nonesuch >/dev/null 2>&1; rc=$?
check "run_all: --only with an unknown group is a usage error" "exit $rc, expected 2" [ $rc -eq 2 ]

DIR=$TMP/smoke
# The whole smoke run under a German locale (decimal comma) when one is there or can be
# made (issue 30): its CSVs must have the columns and numbers LC_ALL=C gives (run_all.sh and
# every script it runs set LC_ALL=C themselves); the schema checks below then hold for both.
de=""
if locale -a 2>/dev/null | grep -qix 'de_DE.utf-\?8'; then de=de_DE.UTF-8
elif command -v localedef >/dev/null && mkdir -p "$TMP/locale" &&
     localedef -i de_DE -f UTF-8 "$TMP/locale/de_DE.UTF-8" >/dev/null 2>&1; then
  export LOCPATH=$TMP/locale; de=de_DE.UTF-8
fi
[ -n "$de" ] && [ "$(LC_ALL=$de awk 'BEGIN { printf "%.1f", 0.5 }' 2>/dev/null)" = "0,5" ] || de=""
RUN=(env ${de:+LC_ALL=$de} ./run_all.sh --smoke --no-setup --results "$DIR")

# ---- 0. the step ids, nothing run
steps=$(./run_all.sh --smoke --list-steps --results "$DIR" 2>&1); rc=$?
# shellcheck disable=SC2317  # called through check
ids_only() { [ $rc = 0 ] && ! grep -qvE '^[a-z0-9-]+$' <<<"$steps"; }
# shellcheck disable=SC2317
all_groups() {
  [ "$(grep -c . <<<"$steps")" -ge 20 ] && [ "$(tail -n 2 <<<"$steps" | paste -sd' ')" = "plots report" ] &&
    grep -qx cuda <<<"$steps" && grep -qx serial-curves <<<"$steps" && grep -qx imagesize <<<"$steps"
}
check "run_all --list-steps: exit 0, ids only" "exit $rc: $(head -n 3 <<<"$steps")" ids_only
check "run_all --list-steps: every group's steps (cuda too), plots and report last" "$(tr '\n' ' ' <<<"$steps")" all_groups
check "run_all --list-steps: writes nothing" "$DIR exists" [ ! -e "$DIR" ]
only=$(./run_all.sh --list-steps --only mpi | paste -sd' ')
check "run_all --list-steps --only mpi: the mpi steps, then plots and report" "got '$only'" \
  [ "$only" = "mpi-bench mpi-sweep hyperfine-mpi plots report" ]

# ---- 1. interrupted in the middle of a step
set -m                      # its own process group: SIGINT is not ignored by the background job
timeout $LIMIT "${RUN[@]}" >"$TMP/run1.out" 2>&1 &
pid=$!
set +m
# in the middle of the MPI scaling sweep, once it has written a few rows
for _ in $(seq 1 $((LIMIT * 5))); do
  f=$DIR/.partial/mpi-sweep/mpi-strong.csv   # a step writes into its staging directory
  [ -f "$f" ] && [ "$(wc -l <"$f")" -ge 3 ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
# timeout(1) passes SIGINT on to run_all.sh
kill -INT $pid 2>/dev/null
wait $pid; rc=$?
check "interrupted run exits 130" "exit $rc; output: $(tail -n 3 "$TMP/run1.out" | tr '\n' ' ')" [ $rc -eq 130 ]
istep=$(sed -n 's/.*interrupted at step \([0-9]*\)\/[0-9]* (\([^)]*\)).*/\1 \2/p' "$TMP/run1.out")
check "interrupted run says which step and to rerun" "no 'interrupted at step k' line" \
  grep -q 'interrupted at step [0-9]*/[0-9]* (.*); rerun to continue' "$TMP/run1.out"
read -r k kid <<<"$istep"
left=""
for _ in $(seq 1 25); do left=$(pgrep -af -- "$DIR" || true); [ -z "$left" ] && break; sleep 0.2; done
check "interrupt stops the whole step (no process left)" "still running: $left" [ -z "$left" ]
ok=0; [ -n "$kid" ] && [ ! -e "$DIR/.done/$kid" ] && ok=1
check "interrupted step ${kid:-?} is not stamped done" "no step named, or $DIR/.done/$kid exists" [ $ok = 1 ]
! grep -q 'Terminated' "$TMP/run1.out"
check "interrupt prints no job-control noise" "a 'Terminated' line in the output" [ $? -eq 0 ]

# ---- 2. rerun: continues at step k
sleep 1.1                     # every row of run 2 has a later timestamp (1 s resolution)
t2=$(date -u +%Y-%m-%dT%H:%M:%SZ)
timeout $LIMIT "${RUN[@]}" >"$TMP/run2.out" 2>&1; rc=$?
check "resumed run exits 0" "exit $rc; $(grep -E 'FAILED|!' "$TMP/run2.out" | head -n 5 | tr '\n' ' ')" [ $rc -eq 0 ]
# each step of run 2 and what became of it: "K earlier" (done earlier), "K skipped" (skipped
# again for its reason: no PyTorch, tool or GPU; such a step is never stamped done), "K ran"
outcomes=$(awk '/^\[[0-9]+\/[0-9]+\]/ { if (cur) print cur, st; match($0, /^\[[0-9]+/); cur = substr($0, 2, RLENGTH - 1)
                  st = ($0 ~ /done earlier, skipped/) ? "earlier" : "?"; next }
                /^    done in / && st == "?" { st = "ran" }
                /^    skipped after / && st == "?" { st = "skipped" }
                /^    FAILED/ && st == "?" { st = "failed" }
                END { if (cur) print cur, st }' "$TMP/run2.out")
n_done=$(grep -c ' earlier$' <<<"$outcomes")
first_run=$(awk '$2 != "earlier" && $2 != "skipped" { print $1; exit }' <<<"$outcomes")
before_k=$(awk -v k="${k:-0}" '$1 < k && $2 != "earlier" && $2 != "skipped"' <<<"$outcomes")
ok=0; [ "${k:-0}" -gt 1 ] && [ "$n_done" -ge 1 ] && [ -z "$before_k" ] && [ "$first_run" = "$k" ] && ok=1
check "resumed run skips the finished steps 1..$((${k:-1} - 1)) (or skips them again for their reason) and starts at step ${k:-?}" \
  "$n_done steps done earlier, first step run: ${first_run:-none}; $(tr '\n' ',' <<<"$outcomes")" [ $ok = 1 ]

# ---- 3. outputs
have_torch=0; "$PY" -c 'import torch' 2>/dev/null && have_torch=1
skipline() { grep -q "^$1"$'\t' "$DIR/skipped.txt" 2>/dev/null; }
csvs=(runs.csv bench-openmp.csv openmp.csv bench-mpi.csv mpi-strong.csv mpi-weak.csv mpi-pipeline.csv
      bench-hybrid.csv hybrid-grid.csv cnn-accuracy.csv cnn-timing.csv imagesize.csv)
if [ $have_torch = 1 ]; then
  csvs+=(bench-serial.csv bench-cnn.csv)
else
  ok=0; skipline serial-vs-torch && skipline cnn-bench && ok=1
  check "no PyTorch: serial-vs-torch and cnn-bench in skipped.txt" "lines missing" [ $ok = 1 ]
fi
for f in "${csvs[@]}"; do check "CSV $f non-empty" "$DIR/$f missing or empty" [ -s "$DIR/$f" ]; done
for t in serial openmp mpi hybrid cnn; do
  if command -v hyperfine >/dev/null; then
    check "hyperfine-$t.json valid" "$DIR/hyperfine-$t.json missing or not hyperfine's JSON" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["results"] and all(r["mean"] > 0 and r["times"] for r in d["results"])' "$DIR/hyperfine-$t.json"
  else
    check "no hyperfine: hyperfine-$t in skipped.txt" "line missing" skipline "hyperfine-$t"
  fi
done
for p in curves openmp-threads mpi-scaling mpi-comm hybrid-grid cnn-speedup imagesize headline; do
  check "PNG $p.png valid" "$DIR/$p.png missing or not a valid PNG" "$PY" -c '
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
assert len(b) > 1000 and b[:8] == b"\x89PNG\r\n\x1a\n"
i, kinds = 8, []
while i < len(b):
    n, kind = struct.unpack(">I4s", b[i:i + 8])
    data, crc = b[i + 8:i + 8 + n], struct.unpack(">I", b[i + 8 + n:i + 12 + n])[0]
    assert zlib.crc32(kind + data) & 0xffffffff == crc, kind
    kinds.append(kind); i += 12 + n
assert i == len(b) and kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
w, h = struct.unpack(">II", b[16:24]); assert w >= 400 and h >= 300' "$DIR/$p.png"
done
# the timelines step: traces, their summary and figures, or (trainers without --trace) the reason
if serial/serial --help 2>&1 | grep -q -- '--trace '; then
  check "timelines: traces/serial.json and trace-summary.csv non-empty" "missing in $DIR" \
    eval '[ -s "$DIR/traces/serial.json" ] && [ -s "$DIR/trace-summary.csv" ]'
  check "timelines: timeline-serial.png drawn" "$DIR/timeline-serial.png missing" [ -s "$DIR/timeline-serial.png" ]
else
  check "no --trace in the trainers: the trace group's reason in skipped.txt" "no trace line" skipline trace
fi
if [ -f scripts/report.py ]; then
  check "REPORT.md non-empty" "$DIR/REPORT.md missing or empty" [ -s "$DIR/REPORT.md" ]
  for h in "Machine" "Seed report 000" "Seed report 001" "Seed report 002" "Seed report 003" "Seed report 004" \
           "Scaling" "What else would you use" "Skipped" "Which timing is which"; do
    check "REPORT.md section '## $h'" "heading missing" grep -qx "## $h" "$DIR/REPORT.md"
  done
  # issue 33: tables of at most 7 columns (the rest in DIR/report-tables/, linked), links that resolve
  widest=$(LC_ALL=C awk '/^\|/ { l = $0; gsub(/\\\|/, "", l); n = gsub(/\|/, "", l) - 1; if (n > m) m = n } END { print m + 0 }' "$DIR/REPORT.md")
  check "REPORT.md: no table wider than 7 columns" "widest: $widest" [ "$widest" -le 7 ]
  "$PY" scripts/report.py --results "$DIR" --plots "$DIR" --out "$TMP/REPORT-again.md" >/dev/null 2>"$TMP/report.err"; rc=$?
  check "report.py on the complete --smoke DIR: exit 0, no line on stderr but notes" "exit $rc: $(head -n 3 "$TMP/report.err")" \
    eval '[ $rc = 0 ] && ! grep -qv ": note: " "$TMP/report.err"'
  check "REPORT.md: the first page right after the title" "$(grep -m 2 '^## ' "$DIR/REPORT.md")" \
    bash -c "[ \"\$(grep -m 1 '^## ' '$DIR/REPORT.md')\" = '## The answer on one page' ]"
  out=$("$PY" tests/check_links.py --no-abs "$DIR/REPORT.md" 2>&1)
  check "REPORT.md: every image and link resolves, no absolute path" "$(head -n 3 <<<"$out")" [ -z "$out" ]
else
  skip "REPORT.md" "scripts/report.py not present (run_all.sh skips the report step)"
fi
if [ -f scripts/machine-info.py ]; then   # machine.json: what the machine was, probed at the start
  check "machine.json: every probed field" "$(head -c 400 "$DIR/machine.json")" "$PY" -c '
import json, sys
m = json.load(open(sys.argv[1]))
want = ("cores", "real_cores", "cpu_model", "cpu_family_model_stepping", "cpu_flags", "sockets_cores_threads",
        "caches", "frequency_governor", "memory_gib", "os", "kernel", "compiler", "mpi", "python", "pytorch",
        "gpu", "git_commit", "date", "c2c_latency_ns")
missing = [k for k in want if k not in m or m[k] in ("", None)]
assert not missing, missing
assert isinstance(m["c2c_latency_ns"], float) or m["c2c_latency_ns"].startswith("not measured"), m["c2c_latency_ns"]' "$DIR/machine.json"
fi
# csv_problems: one line naming what is wrong with the CSVs in $DIR (nothing when all is well)
csv_problems() {
  "$PY" - "$DIR" "$t2" <<'PY'
import csv, glob, os, sys
sys.path.insert(0, "scripts")
import partrain
import trace_summary
import bench_tables
d, t2 = sys.argv[1], sys.argv[2]
header = partrain.results_header()
bad = []
# scripts/trace_summary.py's trace-summary.csv, bench/comm.sh's comm.csv and the bench
# scripts' per-round core bounds (bench-{mpi,openmp,hybrid,cnn}-bounds.csv, openmp-bounds.csv) have schemas of their own
# (docs/tracing-figures.md; docs/comm.md, shared with scripts/model.py; bench_tables.py)
trace_header = list(trace_summary.CSV_HEADER)
comm_header = "transport,op,ranks,nodes,ranks_per_node,bytes,repeat,warmup,iterations,min_us,avg_us,max_us,algbw_gbs,busbw_gbs,timestamp".split(",")
for p in sorted(glob.glob(os.path.join(d, "*.csv"))):
    name, rows = os.path.basename(p), list(csv.reader(open(p, newline="")))
    own = {"comm.csv": (comm_header, "bench/comm"), "trace-summary.csv": (trace_header, "scripts/trace_summary.py"),
           "bench-mpi-bounds.csv": (bench_tables.BOUNDS_HEADER.split(","), "scripts/bench_tables.py --bounds"),
           "bench-openmp-bounds.csv": (bench_tables.BOUNDS_HEADER.split(","), "scripts/bench_tables.py --bounds"),
           "openmp-bounds.csv": (bench_tables.BOUNDS_HEADER.split(","), "scripts/bench_tables.py --bounds"),
           "bench-hybrid-bounds.csv": (bench_tables.BOUNDS_HEADER.split(","), "scripts/bench_tables.py --bounds"),
           "bench-cnn-bounds.csv": (bench_tables.BOUNDS_HEADER.split(","), "scripts/bench_tables.py --bounds")}
    if name in own:
        if not rows or rows[0] != own[name][0]:
            bad.append(f"{name}: header differs from {own[name][1]}'s")
            continue
        want = []
    else:
        # a benchmark adds two columns after the schema (bench_run in scripts/lib.sh), the
        # model's runs four more (bench/model-runs.sh)
        want = [[], ["other_load_cores", "disturbed"]]
        if name == "model-runs.csv":
            want = [["other_load_cores", "disturbed", "transport", "nodes", "ranks_per_node", "physical_cores"]]
        if not rows or rows[0][:len(header)] != header or rows[0][len(header):] not in want:
            bad.append(f"{name}: header differs from RESULTS_HEADER")
            continue
    if len(rows) < 2 and not name.endswith("-bounds.csv"):   # a bound needs a round with P = 1 and P = C
        bad.append(f"{name}: no rows")
    if any(len(r) != len(rows[0]) for r in rows[1:]):
        bad.append(f"{name}: a row of another width")
    ids = [r[0] for r in rows[1:]] if want else [tuple(r) for r in rows[1:]]
    if len(set(ids)) != len(ids) or len({tuple(r) for r in rows[1:]}) != len(rows) - 1:
        bad.append(f"{name}: duplicate rows")
    # each file is the work of one step, done in run 1 or redone in run 2, never both
    ts = {r[rows[0].index("timestamp")] >= t2 for r in rows[1:]} if "timestamp" in rows[0] else set()
    if len(ts) > 1:
        bad.append(f"{name}: rows of the interrupted run and of the resumed one")
print("; ".join(bad))
PY
}
problems=$(csv_problems 2>&1)
check "CSVs: the RESULTS_HEADER of common/results.h, rows of its width, no duplicate or left-over rows" "$problems" [ -z "$problems" ]
if [ -n "$de" ]; then
  # every number column of the schema's CSVs reads as a C float (a "0,5" would not)
  commas=$("$PY" - "$DIR" <<'PY'
import csv, glob, os, sys
bad = []
for p in sorted(glob.glob(os.path.join(sys.argv[1], "*.csv"))):
    rows = list(csv.reader(open(p, newline="")))
    for col in ("epoch_seconds_median", "samples_per_second", "final_train_loss", "other_load_cores", "avg_us"):
        if rows and col in rows[0]:
            i = rows[0].index(col)
            for r in rows[1:]:
                try:
                    float(r[i]) if r[i] else 0.0
                except (ValueError, IndexError):
                    bad.append(f"{os.path.basename(p)}: {col} = {r[i] if i < len(r) else '(missing)'}")
print("; ".join(bad[:3]))
PY
)
  check "the smoke run under LC_ALL=$de: the CSVs above (columns as under LC_ALL=C), every number a C float" \
    "$commas" [ -z "$commas" ]
else
  skip "the smoke run under a German locale" "no de_DE.UTF-8 locale (scripts/setup.sh generates it; localedef failed)"
fi
notlisted=""
for f in "$DIR"/.done/*; do grep -qxF "$(basename "$f")" <<<"$steps" || notlisted+="$(basename "$f") "; done
check "every step stamped done is one run_all.sh --list-steps printed" "not listed: $notlisted" [ -z "$notlisted" ]
check "skipped.txt lines are STEP<TAB>reason" "$(grep -v $'^[a-z0-9-]*\t.' "$DIR/skipped.txt" | head -n 2)" \
  awk -F'\t' 'NF < 2 || $1 == "" || $2 == "" { exit 1 }' "$DIR/skipped.txt"
if [ -x cuda/cuda ] && ! cuda/cuda --data data/mnist --train 64 --test 16 --hidden 8 --epochs 1 --csv none >/dev/null 2>&1; then
  check "no GPU: the cuda step's reason in skipped.txt" "no cuda line" skipline cuda
elif [ ! -x cuda/cuda ]; then
  check "no cuda/cuda: the reason in skipped.txt" "no cuda line" skipline cuda
fi

# ---- 4. a finished run resumes to nothing
sums() { (cd "$DIR" && md5sum ./*.csv ./*.json 2>/dev/null); }
before=$(sums)
timeout $LIMIT "${RUN[@]}" >"$TMP/run3.out" 2>&1; rc=$?
check "third run exits 0" "exit $rc" [ $rc -eq 0 ]
ran=""
while read -r line; do
  # a step that ran again must be one skipped for a reason (no tool, no torch, no GPU)
  nxt=$(grep -A 200 -F -- "$line" "$TMP/run3.out" | sed -n '2,$p' | grep -m 1 -E '^    (done in|skipped after|FAILED)')
  case $nxt in *"skipped after"*) ;; *) ran+="${line:0:60}... " ;; esac
done < <(grep -E '^\[[0-9]+/[0-9]+\]' "$TMP/run3.out" | grep -v 'done earlier, skipped; --fresh to redo')
check "third run: every step done earlier (or skipped for its reason)" "ran again: $ran" [ -z "$ran" ]
check "third run leaves the CSVs and JSON unchanged" "checksums differ" [ "$before" = "$(sums)" ]

finish
