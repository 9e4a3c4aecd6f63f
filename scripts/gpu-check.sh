#!/usr/bin/env bash
# scripts/gpu-check.sh — the CUDA trainer on a real GPU: preflight, build, check, sanitize, time.
#
# Made for a lent GPU machine that is offline (no apt, npm or network): it never fetches.
#   0. preflight: names each missing prerequisite, one line each: nvcc (PATH, else
#      $CUDA_HOME/bin, default /usr/local/cuda/bin; NVCC= overrides), make, a C compiler
#      ($CC, cc), a C++ compiler ($CXX, g++: nvcc's host compiler), the zlib headers,
#      python3 (the table); a
#      visible GPU (nvidia-smi -L) and mpirun (only the 2-rank rows need it) are reported.
#      Then the data: every IDX file it reads (data/mnist, the timing set) is opened; a
#      symlink into a package this machine lacks is named. Missing build prerequisites or
#      data: exit 2, nothing built. Carry the data made by `make gpu-bundle` (docs/cuda.md).
#   1. build: make BIN serial/serial (a failure shows make's last lines, blames no tool);
#   2. a usable GPU: BIN itself on a tiny set (exit status 3 = none, its message says why);
#   3. equivalence: every kernel BIN lists (--list-variants: naive, tiled16, tiled32,
#      cublas) trains 2,000 MNIST digits, 3 epochs, batch 64; each epoch's mean loss within
#      1e-4 relative of serial/serial's (the device's expf/logf differ from the host's by up
#      to 2 ulp; cuBLAS sums in its own order); then with --graph, which must equal the
#      plain run bit for bit; with cuda/cuda-mpi built and mpirun present, 2 ranks too;
#   4. compute-sanitizer --tool memcheck, racecheck, synccheck, initcheck on a small run
#      of every kernel (memcheck on --graph too), when the tool exists (else SKIP rows);
#   5. timing: each kernel, plain and --graph, on Fashion-MNIST (60,000 images), batch 64,
#      784-256-128-10, E epochs (median of epochs 2..E), R runs interleaved, the median
#      over the runs; each run holds /tmp/partrain-bench.lock (flock).
# A failing kernel, run or tool is a FAIL row; the others still run, the table is still
# written, and the exit status says it at the end.
#
# Usage: scripts/gpu-check.sh [--epochs E] [--runs R] [--quick] [--out DIR]
#          [--stop-after preflight|build] [--bin PROGRAM] [--kernels "NAME..."]
#          [--check-train N] [--timing-data DIR] [--timing-train N]
#   --quick       1 run of 3 epochs for the timings
#   --out         where the results go [results/gpu]
#   --stop-after  stop after the preflight and data checks, or after the build (tests)
#   --kernels     some of the kernels PROGRAM --list-variants names (default: all)
#   --bin, --kernels, --check-train, --timing-*: for trying the script itself, e.g. on the
#              CPU emulation: --bin cuda/cuda-emu --kernels "naive tiled16" --check-train 256
#              --timing-data data/mnist --timing-train 256 --epochs 2 --runs 1
# Output: the table on stdout; in DIR: summary.csv (one row per check, sanitizer run and
# timed kernel: section,name,status,...), table.md (the same as markdown; scripts/report.py
# puts it in REPORT.md's GPU section), runs.csv (the trainer's own rows) and gpu-check.log.
# Exit status: 0 every check passed, 1 one failed (FAIL rows), 2 usage, missing
# prerequisite, data or build error, 3 no usable GPU.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -uo pipefail   # no -e: a failing run is a FAIL row, not the end of the script
cd "$(dirname "$0")/.." || exit 2
. scripts/lib.sh    # load_variants

BIN=cuda/cuda KERNELS="" EPOCHS=6 RUNS=3 OUT=results/gpu STOP=""
CHECK_TRAIN=2000 TIMING_DATA=data/fashion TIMING_TRAIN=0
TOL=1e-4
usage_error() { echo "gpu-check: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs|--runs|--bin|--kernels|--check-train|--timing-data|--timing-train|--out|--stop-after)
      [ $# -ge 2 ] || usage_error "$1 needs a value (--help)" ;;&
    --epochs) EPOCHS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --quick) EPOCHS=3; RUNS=1; shift ;;
    --out) OUT=$2; shift 2 ;;
    --stop-after) STOP=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --kernels) KERNELS=$2; shift 2 ;;
    --check-train) CHECK_TRAIN=$2; shift 2 ;;
    --timing-data) TIMING_DATA=$2; shift 2 ;;
    --timing-train) TIMING_TRAIN=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) usage_error "unknown option '$1' (--help)" ;;
  esac
done
for v in EPOCHS RUNS CHECK_TRAIN TIMING_TRAIN; do
  [[ ${!v} =~ ^[0-9]+$ ]] || usage_error "--${v,,} must be a number, got '${!v}'"
done
[ "$EPOCHS" -ge 2 ] || usage_error "--epochs must be >= 2 (epoch 1 is not timed)"
case "$STOP" in ""|preflight|build) ;; *) usage_error "--stop-after: '$STOP' is not preflight or build" ;; esac
mkdir -p "$OUT" || usage_error "--out: cannot create $OUT"
LOG=$OUT/gpu-check.log
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }
TMP=$(mktemp -d /tmp/partrain-gpu-check-XXXXXX)
bench_at_exit "rm -rf '$TMP'"
EMU=0; [[ $BIN == *-emu ]] && EMU=1   # the CPU emulation: no nvcc, no GPU needed

# ---- 0. preflight: each missing prerequisite, one line each
missing=0
lack() { say "gpu-check: missing: $*"; missing=$((missing + 1)); }
NVCC_FOUND=""
if [ -n "${NVCC:-}" ]; then NVCC_FOUND=$(command -v "$NVCC" 2>/dev/null || true)
else NVCC_FOUND=$(command -v nvcc 2>/dev/null || true)
  [ -n "$NVCC_FOUND" ] || { [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ] && NVCC_FOUND=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc; }
fi
if [ $EMU = 0 ] && [ -z "$NVCC_FOUND" ]; then
  lack "nvcc (the CUDA toolkit): ${NVCC:+NVCC=$NVCC not found; }not on PATH nor in ${CUDA_HOME:-/usr/local/cuda}/bin (set NVCC= or CUDA_HOME=)"
fi
command -v make >/dev/null 2>&1 || lack "make (apt-get install make)"
CC_=${CC:-cc} CXX_=${CXX:-g++}
if ! command -v "$CC_" >/dev/null 2>&1; then lack "a C compiler: $CC_ not found (set CC=, or apt-get install gcc)"
elif ! echo '#include <zlib.h>' | "$CC_" -E -x c - >/dev/null 2>&1; then lack "the zlib headers: $CC_ cannot include <zlib.h> (apt-get install zlib1g-dev)"
fi
command -v python3 >/dev/null 2>&1 || lack "python3 (writes the table: scripts/reporting/gpu.py)"
command -v "$CXX_" >/dev/null 2>&1 || lack "a C++ compiler: $CXX_ not found (nvcc's host compiler and the emulation's; set CXX=, or apt-get install g++)"
GPU_SEEN=""
if [ $EMU = 0 ]; then
  if ! command -v nvidia-smi >/dev/null 2>&1; then say "gpu-check: no GPU visible: nvidia-smi not found (the build goes on; the run needs a GPU)"
  elif ! GPU_SEEN=$(nvidia-smi -L 2>/dev/null | grep GPU); then say "gpu-check: no GPU visible: nvidia-smi -L lists none (the build goes on; the run needs a GPU)"
  else say "gpu-check: $GPU_SEEN"; fi
fi
HAVE_MPIRUN=0; command -v mpirun >/dev/null 2>&1 && HAVE_MPIRUN=1
[ $HAVE_MPIRUN = 1 ] || say "gpu-check: mpirun not found: the 2-rank rows will be SKIP"
# the data: open every file a run reads (a dangling symlink passes a directory test)
for dir in data/mnist "$TIMING_DATA"; do
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    p=$dir/$f; [ -e "$p" ] || [ -L "$p" ] || p=$p.gz
    if [ ! -e "$p" ] && [ ! -L "$p" ]; then
      lack "$dir/$f(.gz): no such file (make gpu-bundle where the data can be fetched, then carry data/)"
    elif ! head -c 1 -- "$p" >/dev/null 2>&1; then
      lack "$p: cannot be opened$([ -L "$p" ] && echo ": a symlink to $(readlink "$p"), which this machine lacks") (make gpu-bundle copies the files; carry data/)"
    fi
  done
done
if [ $missing -gt 0 ]; then say "gpu-check: preflight: $missing prerequisite(s) missing (above); nothing built"; exit 2; fi
say "gpu-check: preflight passed (${NVCC_FOUND:-no nvcc needed}, make, $CC_, $CXX_, zlib, data readable)"
[ "$STOP" = preflight ] && exit 0

# ---- 1. build
say "gpu-check: building $BIN and serial/serial"
MAKEVARS=(); [ -n "$NVCC_FOUND" ] && MAKEVARS+=("NVCC=$NVCC_FOUND")
if ! make --no-print-directory "${MAKEVARS[@]}" "$BIN" serial/serial >>"$LOG" 2>&1; then
  say "gpu-check: build failed: make $BIN serial/serial; its last lines (full log $LOG):"
  tail -5 "$LOG"
  exit 2
fi
say "gpu-check: built $BIN and serial/serial"
[ "$STOP" = build ] && exit 0

# ---- 2. a usable GPU?
"$BIN" --data data/mnist --train 64 --test 16 --hidden 8 --epochs 1 --kernel naive --csv none >"$TMP/probe" 2>&1
rc=$?
if [ $rc -eq 3 ]; then say "gpu-check: no usable GPU: $(tail -1 "$TMP/probe")"; exit 3; fi
if [ $rc -ne 0 ]; then say "gpu-check: $BIN failed on a tiny run (exit $rc): $(tail -3 "$TMP/probe")"; exit 1; fi
DEVICE=$(head -1 "$TMP/probe" | sed 's/.*kernel naive, //')
say "gpu-check: device: $DEVICE"

load_variants "$BIN" || exit 2
[ -n "$KERNELS" ] || KERNELS=${VARIANTS[*]}
for k in $KERNELS; do
  [ -n "${VARIANT_FLAGS[$k]:-}" ] || usage_error "unknown kernel '$k' (${VARIANTS[*]})"
done
SUMMARY=$TMP/summary.csv
echo "section,name,status,epoch_seconds,samples_per_second,gflops,test_accuracy,max_rel_diff,detail" >"$SUMMARY"
# row SECTION NAME STATUS EPOCH_S SAMPLES_S GFLOPS ACC DIFF DETAIL (commas in DETAIL become ';')
row() { local d=${9//,/;}; echo "$1,${2//,/;},$3,$4,$5,$6,$7,$8,${d//$'\n'/ }" >>"$SUMMARY"; }
row device "$DEVICE" INFO "" "" "" "" "" "$BIN; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
failed=0
curve_of() { [ -f "$1" ] && awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "train_loss_curve") c = i; next } { v = $c } END { print v }' "$1"; }
max_rel() {   # largest relative difference of two ';'-separated curves ("bad" if lengths differ)
  awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, ";"); m = split(b, y, ";");
    if (n != m || n == 0) { print "bad"; exit } d = 0;
    for (i = 1; i <= n; i++) { e = (x[i] - y[i]) / x[i]; if (e < 0) e = -e; if (!(e <= d)) d = e } printf "%.3g\n", d }'
}
within() { awk -v d="$1" -v t="$TOL" 'BEGIN { exit !(d != "bad" && d + 0 <= t + 0) }'; }

# ---- 3. equivalence with serial (and --graph with the plain path)
CHECK=(--data data/mnist --train "$CHECK_TRAIN" --test 500 --epochs 3 --batch 64 --lr 0.05 --quiet)
ref=""
serial/serial "${CHECK[@]}" --csv "$TMP/serial.csv" >>"$LOG" 2>&1 && ref=$(curve_of "$TMP/serial.csv")
say ""
say "equivalence with serial (MNIST digits, $CHECK_TRAIN samples, 3 epochs, batch 64; tolerance $TOL relative per epoch)"
say "  serial             ${ref:-FAILED (see $LOG): every row below fails}"
declare -A CURVE
check_run() {   # check_run LABEL [--same-as LABEL2] COMMAND...: run, compare, one line and one row
  local label=$1 same=""; shift
  if [ "$1" = --same-as ]; then same=$2; shift 2; fi
  rm -f "$TMP/k.csv"
  "$@" "${CHECK[@]}" --csv "$TMP/k.csv" >>"$LOG" 2>&1
  local rc=$? curve d why=""
  curve=$(curve_of "$TMP/k.csv"); CURVE[$label]=$curve
  d=$(max_rel "$ref" "$curve")
  [ $rc -eq 0 ] || why="exit $rc"
  [ -n "$ref" ] || why="${why:+$why; }no serial reference"
  within "$d" || why="${why:+$why; }max rel diff $d > $TOL"
  if [ -n "$same" ] && [ "$curve" != "${CURVE[$same]:-}" ]; then why="${why:+$why; }differs from $same (must be bit-identical)"; fi
  if [ -z "$why" ]; then
    say "$(printf '  %-22s %s   max rel diff %s%s: PASS' "$label" "$curve" "$d" "${same:+, = $same bit for bit}")"
    row equivalence "$label" PASS "" "" "" "" "$d" "${same:+bit-identical to $same}"
  else
    say "$(printf '  %-22s %s   %s: FAIL' "$label" "${curve:-nothing}" "$why")"
    row equivalence "$label" FAIL "" "" "" "" "$d" "$why"
    failed=1
  fi
}
for k in $KERNELS; do
  read -r -a args <<<"${VARIANT_FLAGS[$k]}"
  check_run "$k" "$BIN" "${args[@]}"
  check_run "$k+graph" --same-as "$k" "$BIN" "${args[@]}" --graph
done
MPIBIN=${BIN/%cuda/cuda-mpi}; MPIBIN=${MPIBIN/%cuda-emu/cuda-mpi-emu}
if [ $HAVE_MPIRUN = 0 ]; then
  say "  2 ranks: SKIP (mpirun not found)"; row equivalence "2 ranks" SKIP "" "" "" "" "" "mpirun not found"
elif ! make --no-print-directory "${MAKEVARS[@]}" "$MPIBIN" >>"$LOG" 2>&1; then
  say "  2 ranks: SKIP ($MPIBIN did not build: no MPI C++ compiler? see $LOG)"
  row equivalence "2 ranks" SKIP "" "" "" "" "" "$MPIBIN did not build (see gpu-check.log)"
else
  for k in $KERNELS; do
    read -r -a args <<<"${VARIANT_FLAGS[$k]}"
    check_run "$k (2 ranks)" scripts/mpirun.sh 2 "$MPIBIN" "${args[@]}"
  done
fi

# ---- 4. compute-sanitizer on a small run of every kernel
SANITIZE=(--data data/mnist --train 128 --test 64 --hidden 32,16 --batch 64 --epochs 1 --quiet --csv none)
SAN=$(command -v compute-sanitizer 2>/dev/null || true)
[ -n "$SAN" ] || { [ -n "$NVCC_FOUND" ] && [ -x "$(dirname "$NVCC_FOUND")/compute-sanitizer" ] && SAN=$(dirname "$NVCC_FOUND")/compute-sanitizer; }
say ""
say "compute-sanitizer (MNIST, 128 samples, 784-32-16-10, 1 epoch)"
for k in $KERNELS; do
  read -r -a args <<<"${VARIANT_FLAGS[$k]}"
  for tool in memcheck racecheck synccheck initcheck memcheck+graph; do
    t=${tool%+graph} g=(); [ "$tool" = "$t" ] || g=(--graph)
    name="$k${g:++graph} $t"
    if [ $EMU = 1 ]; then row sanitizer "$name" SKIP "" "" "" "" "" "the CPU emulation build"; continue; fi
    if [ -z "$SAN" ]; then row sanitizer "$name" SKIP "" "" "" "" "" "compute-sanitizer not found (PATH or nvcc's directory)"; continue; fi
    "$SAN" --tool "$t" --error-exitcode 97 "$BIN" "${SANITIZE[@]}" "${args[@]}" "${g[@]}" >"$TMP/san" 2>&1
    rc=$?
    cat "$TMP/san" >>"$LOG"
    if [ $rc -eq 0 ]; then row sanitizer "$name" PASS "" "" "" "" "" "$(grep -m1 'ERROR SUMMARY' "$TMP/san")"
    else
      why=$([ $rc -eq 97 ] && grep -m1 'ERROR SUMMARY' "$TMP/san" || echo "exit $rc: $(tail -1 "$TMP/san")")
      row sanitizer "$name" FAIL "" "" "" "" "" "$why"; failed=1
    fi
  done
done
awk -F, '$1 == "sanitizer" { printf "  %-26s %s%s\n", $2, $3, ($9 != "" ? "  (" $9 ")" : "") }' "$SUMMARY" | tee -a "$LOG"

# ---- 5. timing: each kernel, plain and --graph, R runs interleaved
RUNS_CSV=$OUT/runs.csv
TIMING=(--data "$TIMING_DATA" --epochs "$EPOCHS" --batch 64 --lr 0.01 --quiet --csv "$RUNS_CSV")
[ "$TIMING_TRAIN" -gt 0 ] && TIMING+=(--train "$TIMING_TRAIN")
say ""
say "timing: $TIMING_DATA, batch 64, 784-256-128-10, $EPOCHS epochs (median of epochs 2..$EPOCHS), $RUNS run(s) per kernel, interleaved"
: >"$TMP/times"
for r in $(seq 1 "$RUNS"); do
  for k in $KERNELS; do
    read -r -a args <<<"${VARIANT_FLAGS[$k]}"
    for g in "" --graph; do
      label=$k${g:++graph}
      before=$( [ -f "$RUNS_CSV" ] && wc -l <"$RUNS_CSV" || echo 0)
      if ! flock /tmp/partrain-bench.lock "$BIN" "${TIMING[@]}" "${args[@]}" $g >>"$LOG" 2>&1; then
        say "  run $r $label: FAILED (see $LOG)"; echo "$label FAIL" >>"$TMP/times"; failed=1; continue
      fi
      # the row just appended, by column name: epoch seconds, GFLOP/s, samples/s, test accuracy
      awk -F, -v k="$label" -v before="$before" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        NR > before { last = $0 } END { n = split(last, v, ",");
          if (n) print k, v[c["epoch_seconds_median"]], v[c["gflops"]], v[c["samples_per_second"]], v[c["test_accuracy"]] }' \
        "$RUNS_CSV" >>"$TMP/times"
      say "  run $r $label: $(tail -1 "$TMP/times" | awk '{ printf "%.4f s per epoch", $2 }')"
    done
  done
done
# per label: the median over the runs of the epoch median (the other columns from that run)
labels=$(for k in $KERNELS; do echo "$k $k+graph"; done | tr '\n' ' ')
awk -v labels="$labels" '
  $2 == "FAIL" { bad[$1] = 1; next }
  { t[$1, ++n[$1]] = $2; g[$1, n[$1]] = $3; s[$1, n[$1]] = $4; a[$1, n[$1]] = $5 }
  END { nk = split(labels, K, " ")
    for (i = 1; i <= nk; i++) { k = K[i]; m = n[k]
      if (bad[k] || !m) { printf "timing,%s,FAIL,,,,,,a timing run failed (see gpu-check.log)\n", k; continue }
      for (x = 1; x <= m; x++) idx[x] = x
      for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (t[k, idx[y]] < t[k, idx[x]]) { z = idx[x]; idx[x] = idx[y]; idx[y] = z }
      mid = idx[int((m + 1) / 2)]
      printf "timing,%s,PASS,%s,%s,%s,%s,,median of %d run(s)\n", k, t[k, mid], s[k, mid], g[k, mid], a[k, mid], m } }' \
  "$TMP/times" >>"$SUMMARY"

# ---- the table: stdout, table.md, summary.csv (into OUT only now, whole)
python3 scripts/reporting/gpu.py --table "$SUMMARY" --images "$([ "$TIMING_TRAIN" -gt 0 ] && echo "$TIMING_TRAIN" || echo 60000)" --what "$TIMING_DATA$([ "$TIMING_TRAIN" -gt 0 ] && echo " (first $TIMING_TRAIN)")" \
  >"$TMP/table.md" 2>>"$LOG" || { say "gpu-check: scripts/reporting/gpu.py could not write the table (see $LOG)"; failed=1; }
mv -f "$SUMMARY" "$OUT/summary.csv"
mv -f "$TMP/table.md" "$OUT/table.md" 2>/dev/null
say ""
tee -a "$LOG" <"$OUT/table.md"
say ""
say "gpu-check: $([ $failed = 0 ] && echo 'every check PASSED' || echo 'FAILED (FAIL rows above)'); $OUT/summary.csv, $OUT/table.md, $OUT/runs.csv, $LOG"
exit $failed
