#!/usr/bin/env bash
# run_all.sh — set up, build, run every partrain experiment, and plot the results.
#
# Usage: ./run_all.sh [--quick] [--only serial,openmp,...] [--results DIR]
#   --quick         a few minutes: training subsets, fewer epochs, fewer repetitions;
#                   results go to results/quick/ (the full results are left alone)
#   --only LIST     only these trainers' steps (comma-separated): serial openmp mpi
#                   hybrid cuda cnn (default: all)
#   --results DIR   where CSVs, JSON and logs go (default results, or results/quick)
#
# Set-up: scripts/setup.sh run (missing Debian packages — gnuplot-nox, hyperfine,
# ... — installed with apt-get when root, otherwise the exact apt-get line is
# printed), scripts/get-data.sh when data/ is incomplete, `make all` when a binary
# is missing or out of date. Then the steps, each announced as "[k/n] ...":
#   serial  (a) loss/accuracy curves: MNIST digits (data/mnist) and Fashion-MNIST
#               (data/fashion), 10 epochs each -> DIR/runs.csv
#           (b) whole-run timing with hyperfine -> DIR/hyperfine-serial.json
#           (c) serial vs PyTorch, one core (bench/serial-vs-torch.sh)
#               -> DIR/bench-serial.csv and a table
#   openmp  (a) openmp/openmp, --accum critical|reduction|loop x T = 1, 2, vs serial and
#               PyTorch (1 and 2 threads), batch 64 and 512, median of 3 runs
#               (bench/openmp-bench.sh) -> DIR/bench-openmp.csv and a table
#           (b) thread sweep T = 1, 2, 4, 8 per mode, batch 64, median of 2 runs; T above
#               the cores with OMP_WAIT_POLICY=passive (bench/openmp-bench.sh --threads
#               1,2,4,8) -> DIR/openmp.csv, drawn by the plots step as
#               plots/openmp-threads.png
#   mpi     (a) mpi/mpi vs serial on Fashion-MNIST, batch 64 and 512, P = 1, 2, every
#               --sync, median of 3 runs, plus the overlap microbenchmark
#               (bench/mpi-bench.sh) -> DIR/bench-mpi.csv and a table
#           (b) strong and weak scaling, P = 1, 2, 4, 8, every --sync, and the
#               pipeline's bubble for P = 1..3, M = 1, 4, 8 (bench/mpi-sweep.sh)
#               -> DIR/mpi-strong.csv, DIR/mpi-weak.csv, DIR/mpi-pipeline.csv
#   cnn     (a) seed report 003's convergence runs on the MNIST digits (lr 0.01, 5 epochs):
#               1x1 and 2x2 with the global batch 32, 2 and 4 ranks x 32 per rank
#               -> DIR/cnn-accuracy.csv
#           (b) 5 epochs of the 60k Fashion-MNIST images, 1x1 1x2 2x1 2x2, twice
#               -> DIR/cnn-timing.csv
#           (c) the report's Tables 3, 4, 5 with our numbers beside its own
#               (scripts/cnn_tables.py) -> DIR/cnn-table{3,4,5}.md, and its speedup-vs-
#               cores figure plots/cnn-speedup.png (--quick: DIR/cnn-speedup.png)
#           (d) cnn vs PyTorch (bench/cnn-bench.sh) -> DIR/bench-cnn.csv and a table
#   hybrid  (a) hybrid/hybrid vs serial, batch 64 and 512, P x T = 1x1 1x2 2x1 2x2, median
#               of 3 runs (bench/hybrid-bench.sh) -> DIR/bench-hybrid.csv and a table
#           (b) the grid P x T in {1,2,4}x{1,2,4} at 60k samples, batch 512
#               (bench/hybrid-grid.sh) -> DIR/hybrid-grid.csv, plots/hybrid-grid.png (heat
#               maps of epoch time and speedup; --quick: DIR/hybrid-grid.png) and seed
#               report 001's Table 4 with our measured column -> DIR/hybrid-table4.md
#   plots   plots/curves.png from DIR/runs.csv alone (scripts/plot.sh; with
#           --quick: DIR/curves.png); plots/mpi-scaling.png and plots/mpi-comm.png
#           from DIR/mpi-{strong,weak}.csv; plots/openmp-threads.png from DIR/openmp.csv
# Trainers not implemented yet (openmp, mpi, hybrid, cuda, cnn) print a line saying
# they were skipped; a new trainer adds a steps_NAME function below.
# Every run is single-threaded and pinned (taskset -c 0) with OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE removed from the environment, unless a step says otherwise.
# Each step's full output goes to DIR/logs/STEP.log. Anything skipped says so.
# Exit status: 0 when every step that ran succeeded, 1 otherwise, 2 on a usage error.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")" || exit 2
# shellcheck disable=SC2317  # the step functions are called indirectly (step_fn)

PY=/usr/bin/python3              # Debian's interpreter (sees python3-torch)
ALL_PROGRAMS=(serial openmp mpi hybrid cuda cnn)
quick=0 only="" results=""

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --only) [ $# -ge 2 ] || { echo "run_all: --only needs a list" >&2; exit 2; }; only=$2; shift 2 ;;
    --results) [ $# -ge 2 ] || { echo "run_all: --results needs a directory" >&2; exit 2; }; results=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_all: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$results" ] || results=$([ $quick = 1 ] && echo results/quick || echo results)
if [ $quick = 1 ]; then curves_png=$results/curves.png; else curves_png=plots/curves.png; fi

selected=()
if [ -z "$only" ]; then
  selected=("${ALL_PROGRAMS[@]}")
else
  IFS=, read -r -a selected <<<"$only"
  for p in "${selected[@]}"; do
    [[ " ${ALL_PROGRAMS[*]} " == *" $p "* ]] ||
      { echo "run_all: --only: unknown trainer '$p' (${ALL_PROGRAMS[*]})" >&2; exit 2; }
  done
fi
mkdir -p "$results/logs"
failed=0
t_all=$SECONDS

# ---------------------------------------------------------------- helpers
# one pinned core, one thread, OpenBLAS choosing its own kernels
PIN1=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
      MKL_NUM_THREADS=1 taskset -c 0)

note() { echo "    $*"; }

# run_logged LOG CMD...: run CMD, its output appended to LOG; shows the trainer's
# summary line, or the last lines of its output when it fails
run_logged() {
  local log=$1; shift
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  { echo "\$ $*"; printf '%s\n' "$out"; } >>"$log"
  if [ $rc = 0 ]; then
    printf '%s\n' "$out" | grep -E '^(serial|pytorch|openmp|mpi|hybrid|cuda|cnn): .*\| ' | tail -n 1 | sed 's/^/    /'
  else
    printf '%s\n' "$out" | tail -n 4 | sed 's/^/    ! /'
    note "exit status $rc: $*"
  fi
  return $rc
}

# ---------------------------------------------------------------- set-up
echo "run_all: $([ $quick = 1 ] && echo quick || echo full) run of: ${selected[*]}; results in $results/"
if [ -x scripts/setup.sh ]; then
  echo "[setup] packages and data (scripts/setup.sh run)"
  scripts/setup.sh run 2>&1 | sed 's/^/    /' ||
    echo "    setup incomplete (see above); steps whose tools or data are missing will be skipped"
fi
for tool in gnuplot hyperfine taskset; do
  command -v $tool >/dev/null ||
    echo "[setup] $tool missing: steps needing it are skipped (install: apt-get install $(
      case $tool in gnuplot) echo gnuplot-nox;; taskset) echo util-linux;; *) echo $tool;; esac))"
done
if [ ! -d data/fashion ] || [ ! -d data/mnist ]; then
  echo "[setup] data/ incomplete: scripts/get-data.sh"
  scripts/get-data.sh 2>&1 | sed 's/^/    /' || echo "    get-data failed; steps needing the missing data are skipped"
fi
binaries=()
for p in "${selected[@]}"; do binaries+=("$p/$p"); done
need_build=0
for b in "${binaries[@]}"; do
  if [ -f "$b.c" ] || [ -f "$b.cu" ]; then
    # missing, or older than its sources (make -q cannot tell: phony prerequisites)
    if [ ! -x "$b" ] || [ -n "$(find "$(dirname "$b")" common Makefile -newer "$b" \
                                 \( -name '*.[ch]' -o -name '*.cu' -o -name Makefile \) 2>/dev/null | head -n 1)" ]; then
      need_build=1
    fi
  fi
done
if [ $need_build = 1 ]; then
  echo "[setup] binaries missing or older than their sources: make all"
  make all 2>&1 | tail -n 12 | sed 's/^/    /'
fi

# ---------------------------------------------------------------- steps
# Each steps_NAME function registers its steps with add_step; a trainer whose
# binary is missing registers a skip line instead.
step_fn=() step_desc=()
add_step() { step_fn+=("$1"); step_desc+=("$2"); }
skipped() { echo "[skip] $*"; }

have_data() { [ -d "$1" ] || { note "skipped: $1 missing (scripts/get-data.sh)"; return 1; }; }

# --- serial ---
serial_curves() {
  local log=$results/logs/serial-curves.log ok=0
  : >"$log"
  local mnist_args=(--epochs 10) fashion_args=(--epochs 10)
  [ $quick = 0 ] || { mnist_args=(--epochs 3); fashion_args=(--train 10000 --epochs 3); }
  if have_data data/mnist; then
    run_logged "$log" "${PIN1[@]}" serial/serial --data data/mnist "${mnist_args[@]}" --csv "$results/runs.csv" || ok=1
  fi
  if have_data data/fashion; then
    run_logged "$log" "${PIN1[@]}" serial/serial --data data/fashion "${fashion_args[@]}" --csv "$results/runs.csv" || ok=1
  fi
  return $ok
}

serial_hyperfine() {
  command -v hyperfine >/dev/null || { note "skipped: hyperfine missing (apt-get install hyperfine)"; return 0; }
  have_data data/fashion || return 0
  local log=$results/logs/serial-hyperfine.log json=$results/hyperfine-serial.json
  local args="--data data/fashion --quiet --csv none" runs=3
  [ $quick = 0 ] || { args+=" --train 10000 --epochs 2"; runs=2; }
  local pin="${PIN1[*]}"
  local cmds=(-n serial-own-gemm "$pin serial/serial --gemm own $args")
  if ! serial/serial --help | grep -q 'not built in'; then
    cmds+=(-n serial-blas "$pin serial/serial --gemm blas $args")
  fi
  echo "\$ hyperfine ... ${cmds[*]}" >"$log"
  if hyperfine --style basic --warmup 1 --runs $runs --export-json "$json" "${cmds[@]}" >>"$log" 2>&1; then
    grep -E '^(Benchmark|  Time)' "$log" | sed 's/^ */    /'
    note "-> $json"
  else
    tail -n 5 "$log" | sed 's/^/    ! /'
    return 1
  fi
}

serial_vs_torch() {
  if ! "$PY" -c 'import torch' 2>/dev/null; then
    note "skipped: $PY cannot import torch (apt-get install python3-torch)"
    return 0
  fi
  have_data data/fashion || return 0
  local log=$results/logs/serial-vs-torch.log args=()
  [ $quick = 0 ] || args=(--quick)
  if bench/serial-vs-torch.sh "${args[@]}" --csv "$results/bench-serial.csv" >"$log" 2>&1; then
    sed -n '/^median over/,$p' "$log" | sed 's/^/    /'
  else
    tail -n 5 "$log" | sed 's/^/    ! /'
    return 1
  fi
}

steps_serial() {
  add_step serial_curves "serial: loss/accuracy curves, MNIST digits + Fashion-MNIST ($([ $quick = 1 ] && echo '3 epochs, Fashion 10k' || echo '10 epochs')) -> $results/runs.csv"
  add_step serial_hyperfine "serial: whole-run timing with hyperfine -> $results/hyperfine-serial.json"
  add_step serial_vs_torch "serial vs PyTorch on one core (bench/serial-vs-torch.sh$([ $quick = 1 ] && echo ' --quick')) -> $results/bench-serial.csv"
}

# --- openmp --- (bench/openmp-bench.sh confines a T-thread run to cores 0..T-1 with
# taskset, sets OMP_WAIT_POLICY=passive above the cores, runs everything under the
# benchmark lock and repeats a run that other load on the machine disturbed)
openmp_bench() {
  have_data data/fashion || return 0
  local log=$results/logs/openmp-bench.log args=()
  [ $quick = 0 ] || args=(--quick)
  if bench/openmp-bench.sh "${args[@]}" --csv "$results/bench-openmp.csv" >"$log" 2>&1; then
    sed -n '/^median over/,$p' "$log" | sed 's/^/    /'
  else
    tail -n 5 "$log" | sed 's/^/    ! /'
    return 1
  fi
}

openmp_sweep() {
  have_data data/fashion || return 0
  local log=$results/logs/openmp-sweep.log args=(--threads 1,2,4,8 --batches 64 --no-torch --runs 2 --epochs 3)
  [ $quick = 0 ] || args+=(--quick)
  rm -f "$results/openmp.csv"     # the figure shows this sweep only
  if bench/openmp-bench.sh "${args[@]}" --csv "$results/openmp.csv" >"$log" 2>&1; then
    sed -n '/^batch /,$p' "$log" | sed 's/^/    /'
  else
    tail -n 5 "$log" | sed 's/^/    ! /'
    return 1
  fi
}

steps_openmp() {
  add_step openmp_bench "openmp: critical/reduction/loop x T = 1, 2 vs serial and PyTorch, batch 64 and 512 (bench/openmp-bench.sh$([ $quick = 1 ] && echo ' --quick')) -> $results/bench-openmp.csv"
  add_step openmp_sweep "openmp: thread sweep T = 1, 2, 4, 8 per mode, batch 64, OMP_WAIT_POLICY=passive above $(nproc) cores$([ $quick = 1 ] && echo ', quick subset') -> $results/openmp.csv (plots/openmp-threads.png in the plots step)"
}

# --- mpi --- (ranks are launched by scripts/mpirun.sh and bound by mpirun, not taskset)
mpi_bench() {
  have_data data/fashion || return 0
  local log=$results/logs/mpi-bench.log args=()
  [ $quick = 0 ] || args=(--quick)
  if bench/mpi-bench.sh "${args[@]}" --csv "$results/bench-mpi.csv" >"$log" 2>&1; then
    sed -n '/^median over/,$p' "$log" | sed 's/^/    /'
  else
    tail -n 5 "$log" | sed 's/^/    ! /'
    return 1
  fi
}

mpi_sweep() {
  have_data data/fashion || return 0
  [ -x mpi/pipeline ] || { note "mpi/pipeline not built: make all"; return 1; }
  local log=$results/logs/mpi-sweep.log args=()
  [ $quick = 0 ] || args=(--quick)
  if bench/mpi-sweep.sh "${args[@]}" --results "$results" >"$log" 2>&1; then
    grep -vE '^mpi-sweep: ' "$log" | cut -c1-150 | sed 's/^/    /'
  else
    tail -n 5 "$log" | sed 's/^/    ! /'
    return 1
  fi
}

steps_mpi() {
  add_step mpi_bench "mpi: data parallel vs serial, P = 1, 2, batch 64 and 512 (bench/mpi-bench.sh$([ $quick = 1 ] && echo ' --quick')) -> $results/bench-mpi.csv"
  add_step mpi_sweep "mpi: strong/weak scaling and pipeline bubble (bench/mpi-sweep.sh$([ $quick = 1 ] && echo ' --quick')) -> $results/mpi-{strong,weak,pipeline}.csv"
}

# --- hybrid --- (P ranks x T threads by scripts/mpirun.sh --bind-to-none; P*T above the
# cores with OMP_WAIT_POLICY=passive; every timed run under the benchmark lock)
hybrid_bench() {
  have_data data/fashion || return 0
  local log=$results/logs/hybrid-bench.log args=()
  [ $quick = 0 ] || args=(--runs 1 --epochs 2 --train 10000)
  if bench/hybrid-bench.sh "${args[@]}" --csv "$results/bench-hybrid.csv" >"$log" 2>&1; then
    grep -v '^run ' "$log" | sed 's/^/    /'
  else
    tail -n 5 "$log" | sed 's/^/    ! /'
    return 1
  fi
}

hybrid_grid() {
  have_data data/fashion || return 0
  local log=$results/logs/hybrid-grid.log args=() png=plots/hybrid-grid.png
  [ $quick = 0 ] || { args=(--epochs 2 --train 10000); png=$results/hybrid-grid.png; }
  if bench/hybrid-grid.sh "${args[@]}" --csv "$results/hybrid-grid.csv" --dat "$results/hybrid-grid.dat" \
       --plot "$png" --table "$results/hybrid-table4.md" >"$log" 2>&1; then
    grep -vE '^(serial|hybrid [0-9])' "$log" | sed -n '/^| Implementation/,$p' | sed 's/^/    /'
  else
    tail -n 5 "$log" | sed 's/^/    ! /'
    return 1
  fi
}

steps_hybrid() {
  local q=""; [ $quick = 1 ] && q=", quick subset"
  add_step hybrid_bench "hybrid vs serial, P x T = 1x1 1x2 2x1 2x2, batch 64 and 512 (bench/hybrid-bench.sh$q) -> $results/bench-hybrid.csv"
  add_step hybrid_grid "hybrid: P x T in {1,2,4}x{1,2,4}, 60k samples, batch 512 (bench/hybrid-grid.sh$q) -> $results/hybrid-grid.csv, $([ $quick = 1 ] && echo "$results" || echo plots)/hybrid-grid.png, $results/hybrid-table4.md"
}

# --- cnn --- (seed report 003's tables; ranks by scripts/mpirun.sh, threads per rank
# with --bind-to-none, and ranks x threads above the cores with OMP_WAIT_POLICY=passive and
# mpi_yield_when_idle; every timed run under the benchmark lock)
CNN_LOCK=(); command -v flock >/dev/null && CNN_LOCK=(flock /tmp/partrain-bench.lock)
cnn_cmd=()
cnn_launch() {   # P T: sets cnn_cmd to the command line of cnn/cnn with P ranks x T threads
  local p=$1 t=$2 env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE) bind=()
  [ "$t" -gt 1 ] && bind=(--bind-to-none)
  # more workers than cores: threads sleep when they wait, and so do ranks waiting in MPI
  # (scripts/mpirun.sh itself adds mpi_yield_when_idle when the ranks alone exceed the cores)
  [ $((p * t)) -gt "$(nproc)" ] && env+=(OMP_WAIT_POLICY=passive)
  [ $((p * t)) -gt "$(nproc)" ] && [ "$p" -le "$(nproc)" ] && env+=("MPIRUN_ARGS=--mca mpi_yield_when_idle 1")
  cnn_cmd=("${CNN_LOCK[@]}" "${env[@]}" scripts/mpirun.sh "${bind[@]}" "$p" cnn/cnn --threads "$t")
}

cnn_accuracy() {
  have_data data/mnist || return 0
  local log=$results/logs/cnn-accuracy.log csv=$results/cnn-accuracy.csv ok=0
  : >"$log"; rm -f "$csv"
  local args=(--data data/mnist --epochs 5 --lr 0.01 --csv "$csv")
  [ $quick = 0 ] || args+=(--train 2000 --test 500)
  cnn_launch 1 1; run_logged "$log" "${cnn_cmd[@]}" "${args[@]}" --batch 32 || ok=1
  cnn_launch 2 2; run_logged "$log" "${cnn_cmd[@]}" "${args[@]}" --batch 32 || ok=1
  cnn_launch 2 1; run_logged "$log" "${cnn_cmd[@]}" "${args[@]}" --batch-per-rank 32 || ok=1
  cnn_launch 4 1; run_logged "$log" "${cnn_cmd[@]}" "${args[@]}" --batch-per-rank 32 || ok=1
  return $ok
}

cnn_timing() {
  have_data data/fashion || return 0
  local log=$results/logs/cnn-timing.log csv=$results/cnn-timing.csv ok=0 reps=2
  : >"$log"; rm -f "$csv"
  local args=(--data data/fashion --epochs 5 --batch 32 --lr 0.01 --quiet --csv "$csv")
  [ $quick = 0 ] || { args+=(--train 10000 --epochs 2); reps=1; }
  for _ in $(seq 1 $reps); do
    for pt in "1 1" "1 2" "2 1" "2 2"; do
      # shellcheck disable=SC2086  # "P T"
      cnn_launch $pt; run_logged "$log" "${cnn_cmd[@]}" "${args[@]}" || ok=1
    done
  done
  return $ok
}

cnn_tables() {
  local png=plots/cnn-speedup.png log=$results/logs/cnn-tables.log
  [ $quick = 0 ] || png=$results/cnn-speedup.png
  if ! "$PY" scripts/cnn_tables.py --accuracy "$results/cnn-accuracy.csv" --timing "$results/cnn-timing.csv" \
       --outdir "$results" --dat "$results/cnn-speedup.dat" >"$log" 2>&1; then
    tail -n 3 "$log" | sed 's/^/    ! /'
    return 1
  fi
  sed 's/^/    /' "$log"
  grep -E '^\| (report|ours)' "$results/cnn-table4.md" | sed 's/^/    /'
  if command -v gnuplot >/dev/null; then
    mkdir -p "$(dirname "$png")"
    gnuplot -e "dat='$results/cnn-speedup.dat'; out='$png'; src='$results/cnn-timing.csv'" plots/cnn-speedup.gp >>"$log" 2>&1 ||
      { tail -n 3 "$log" | sed 's/^/    ! /'; return 1; }
    note "-> $png"
  else
    note "gnuplot missing: $png skipped (apt-get install gnuplot-nox)"
  fi
}

cnn_bench() {
  have_data data/fashion || return 0
  if ! "$PY" -c 'import torch' 2>/dev/null; then
    note "skipped: $PY cannot import torch (apt-get install python3-torch)"
    return 0
  fi
  local log=$results/logs/cnn-bench.log args=()
  [ $quick = 0 ] || args=(--quick)
  if bench/cnn-bench.sh "${args[@]}" --csv "$results/bench-cnn.csv" >"$log" 2>&1; then
    sed -n '/^median over/,$p' "$log" | sed 's/^/    /'
  else
    tail -n 5 "$log" | sed 's/^/    ! /'
    return 1
  fi
}

steps_cnn() {
  local q=""; [ $quick = 1 ] && q=", quick subset"
  add_step cnn_accuracy "cnn: seed report 003's convergence runs, MNIST digits, lr 0.01, 5 epochs: 1x1, 2x2 (global batch 32), 2 and 4 ranks x 32 per rank$q -> $results/cnn-accuracy.csv"
  add_step cnn_timing "cnn: 5 epochs of 60k Fashion-MNIST images, 1x1, 1x2, 2x1, 2x2$q -> $results/cnn-timing.csv"
  add_step cnn_tables "cnn: seed report 003's Tables 3, 4, 5 and speedup figure -> $results/cnn-table{3,4,5}.md, $([ $quick = 1 ] && echo "$results" || echo plots)/cnn-speedup.png"
  add_step cnn_bench "cnn vs PyTorch, 1x1 1x2 2x1 2x2 and torch 1, 2 threads (bench/cnn-bench.sh$([ $quick = 1 ] && echo ' --quick')) -> $results/bench-cnn.csv"
}

# --- plots ---
plots() {
  command -v gnuplot >/dev/null || { note "skipped: gnuplot missing (apt-get install gnuplot-nox)"; return 0; }
  scripts/plot.sh --csv "$results/runs.csv" --out "$curves_png" 2>&1 | sed 's/^/    /'
}

# ---------------------------------------------------------------- run
for p in "${selected[@]}"; do
  if [ ! -x "$p/$p" ]; then
    if [ -f "$p/$p.c" ] || [ -f "$p/$p.cu" ]; then
      skipped "$p: $p/$p did not build (see make all above)"
    else
      skipped "$p: not implemented yet (no $p/$p.c)"
    fi
  elif declare -F "steps_$p" >/dev/null; then
    "steps_$p"
  else
    skipped "$p: built, but run_all.sh has no steps for it yet"
  fi
done
add_step plots "plots: $curves_png from $results/runs.csv (scripts/plot.sh)"

n=${#step_fn[@]}
for k in $(seq 1 "$n"); do
  echo "[$k/$n] ${step_desc[k-1]}"
  t0=$SECONDS
  if "${step_fn[k-1]}"; then
    note "done in $((SECONDS - t0)) s"
  else
    note "FAILED after $((SECONDS - t0)) s (log: $results/logs/)"
    failed=1
  fi
done
echo "run_all: finished in $((SECONDS - t_all)) s$([ $failed = 1 ] && echo '; some steps FAILED')"
exit $failed
