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
#   plots   plots/curves.png from DIR/runs.csv alone (scripts/plot.sh; with
#           --quick: DIR/curves.png)
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
