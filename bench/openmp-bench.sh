#!/usr/bin/env bash
# bench/openmp-bench.sh — openmp/openmp's --accum modes against serial and PyTorch.
#
# One invocation measures side by side, on Fashion-MNIST (all 60k, the default MLP):
#   serial/serial                       pinned to core 0 (taskset -c 0), one thread
#   openmp/openmp FLAGS --threads T     for each variant openmp/openmp --list-variants
#                                       names (FLAGS: --accum MODE) and each T in --threads
#   bench/torch_mlp.py --threads T      for each T, with OMP/OPENBLAS/MKL_NUM_THREADS=T
# for each mini-batch size in --batches. A run with T threads is confined to cores
# 0..T-1 (taskset), so T = 1 is pinned like serial. OMP_WAIT_POLICY is left unset (the
# runtime's default: spin a while, then sleep) while T <= cores, and set to passive
# above that; the CSV column omp_wait_policy records which. OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE are removed from the environment (OpenBLAS picks its own kernels).
# Every run is wrapped in `flock /tmp/partrain-bench.lock` so no two benchmark runs of
# the suite overlap, and the whole set is repeated R times, interleaved (serial,
# openmp..., torch..., serial, ...), so slow drifts of a shared machine hit every
# program alike. Other work on the machine hurts threaded runs far more than pinned
# single-thread ones (a thread that loses its core stalls every barrier of its team),
# so each run is checked: the CPU time the machine spent outside the run (/proc/stat
# minus the run's own CPU time) must stay below --max-other cores on average, else the
# run is repeated (up to --tries times, after waiting up to --idle-wait S (30) seconds for 2
# idle seconds), and a run that never got a quiet machine is kept but flagged "disturbed"
# in its line and in its row. A machine that never gets idle does not stop the benchmark:
# it says so once ("bench: the machine is busy (N% of a core of outside load); measuring
# anyway, rows marked disturbed") and measures. Accepted rows are appended to the CSV
# with two columns after the trainers' schema: other_load_cores (the other load during
# the run) and disturbed (1 when it exceeded --max-other); then per batch size a table of the
# median over the R runs of each run's epoch_seconds_median (itself the median of
# epochs 2..E), the median sync_seconds (per epoch, summed over threads: time in the
# critical section, or waiting at barriers, as each mode counts it), the speedup vs
# serial, and how many times faster than PyTorch's best thread count; and verdict lines
# for the targets (best mode at T = 2: >= 1.6x serial at batch 64, >= 1.85x at batch 512;
# >= 2.5x faster than PyTorch's best). The tables: scripts/bench_tables.py openmp.
#
# Usage: bench/openmp-bench.sh [--epochs E] [--runs R] [--batches B,B] [--threads T,T]
#                              [--csv FILE] [--data DIR] [--train N] [--no-torch] [--quick]
#                              [--tries N] [--max-other C] [--idle-wait S]
#                              [--report-only [--since ISO]]
#   --epochs E     epochs per run (default 4: the median is over epochs 2..4)
#   --runs R       repetitions of the whole set (default 3)
#   --batches L    mini-batch sizes (default 64,512)
#   --threads L    thread counts for openmp and PyTorch (default 1,2)
#   --csv FILE     where the rows go (default results/bench-openmp.csv)
#   --data DIR     data set (default data/fashion)
#   --train N      use the first N training samples (default all)
#   --no-torch     leave PyTorch out
#   --tries N      attempts per run when other load disturbed it (default 3; 1: no check)
#   --max-other C  other processes' load tolerated during a run, in cores (default 0.05)
#   --idle-wait S  seconds to wait for an idle machine before a run (default 30; once the
#                  machine was found busy, one 2 s check per run)
#   --report-only  run nothing: print the tables from the rows of --csv (with the same
#                  --epochs and --train) whose timestamp is >= --since ISO (default: all)
#   --quick        smoke test: --train 6400 --epochs 2 --runs 1 --tries 1
# Exit status: 0 (also on a busy machine); 1 when a run fails; 2 on a usage error or a
# missing prerequisite; each with its reason on stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. bench/lib.sh

epochs=4 runs=3 batches=64,512 threads=1,2 csv=results/bench-openmp.csv data=data/fashion train=0 torch=1
tries=3 max_other=0.05 report_only=0 since='' idle_wait=30
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs)  need_value "$@"; epochs=$2; shift 2 ;;
    --runs)    need_value "$@"; runs=$2; shift 2 ;;
    --batches) need_value "$@"; batches=$2; shift 2 ;;
    --threads) need_value "$@"; threads=$2; shift 2 ;;
    --csv)     need_value "$@"; csv=$2; shift 2 ;;
    --data)    need_value "$@"; data=$2; shift 2 ;;
    --train)   need_value "$@"; train=$2; shift 2 ;;
    --no-torch) torch=0; shift ;;
    --report-only) report_only=1; shift ;;
    --since)   need_value "$@"; since=$2; shift 2 ;;
    --tries)   need_value "$@"; tries=$2; shift 2 ;;
    --max-other) need_value "$@"; max_other=$2; shift 2 ;;
    --idle-wait) need_value "$@"; idle_wait=$2; shift 2 ;;
    --quick)   train=6400 epochs=2 runs=1 tries=1; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $max_other =~ ^[0-9]*\.?[0-9]+$ ]] || die "--max-other: not a number: '$max_other'"
for v in epochs runs train tries idle_wait; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "--$v: not a non-negative integer: '${!v}'"
done
[ "$epochs" -ge 1 ] && [ "$runs" -ge 1 ] && [ "$tries" -ge 1 ] || die "--epochs, --runs and --tries must be >= 1"
[[ $batches =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--batches: expected a list like 64,512: '$batches'"
[[ $threads =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--threads: expected a list like 1,2: '$threads'"
[ "$csv" != none ] || die "--csv none: the table is built from the CSV; give a file"
IFS=, read -r -a batch_list <<<"$batches"
IFS=, read -r -a thread_list <<<"$threads"

summarize() {   # the tables, from the rows of $csv with timestamp >= $since
  "$PY" scripts/bench_tables.py openmp "$csv" --since "$since" --epochs "$epochs" --train "$train"
}
if [ "$report_only" = 1 ]; then
  [ -s "$csv" ] || die "$csv: missing or empty"
  summarize
  exit 0
fi

# prerequisites
need_tools taskset flock
[ -x serial/serial ] || die "serial/serial is not built (run: make serial)"
[ -x openmp/openmp ] || die "openmp/openmp is not built (run: make openmp; needs a compiler with -fopenmp)"
[ -d "$data" ] || die "$data missing (run: scripts/get-data.sh)"
load_variants openmp/openmp || exit 2
torch_version=none
if [ $torch = 1 ]; then
  torch_version=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
    die "$PY cannot import torch (apt-get install python3-torch, or --no-torch)"
fi
cores=$(nproc)
mkdir -p "$(dirname "$csv")"
if [ -s "$csv" ] && [[ "$(head -n 1 "$csv")" != run_id,* ]]; then
  die "$csv: not a results CSV (its header: $(head -n 1 "$csv" | cut -c1-60)): give another --csv"
fi

# env + taskset for a run with T threads: cores 0..T-1 (all cores when T > cores)
launch() {
  local T=$1 cpus policy=()
  if [ "$T" -le "$cores" ]; then cpus="0-$((T - 1))"; else cpus="0-$((cores - 1))"; policy=(OMP_WAIT_POLICY=passive); fi
  echo env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OMP_WAIT_POLICY "${policy[@]}" \
    OMP_NUM_THREADS="$T" OPENBLAS_NUM_THREADS="$T" MKL_NUM_THREADS="$T" taskset -c "$cpus"
}

common=(--data "$data" --epochs "$epochs" --quiet)
[ "$train" -eq 0 ] || common+=(--train "$train")
[ -n "$since" ] || since=$(utc_now)
per_set=$(( 1 + ${#VARIANTS[@]} * ${#thread_list[@]} + torch * ${#thread_list[@]} ))
total=$(( runs * ${#batch_list[@]} * per_set ))
echo "openmp-bench: $data$([ "$train" -eq 0 ] || echo " (first $train samples)"), batches ${batches}, threads ${threads}, $epochs epochs x $runs runs," \
     "$cores cores, torch $torch_version; rows -> $csv"
# load accounting: busy and total jiffies of all CPUs (cpu_ticks); CPU seconds of this
# shell's children
children_cpu() {   # `times` must run in this shell, not in a $(...) subshell
  times >"$tmp/times"
  tail -n 1 "$tmp/times" | awk '{ s = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); s += a[1] * 60 + a[2] } print s }'
}
hz=$(getconf CLK_TCK)
tmp=$(mktemp -d /tmp/openmp-bench-XXXXXX)
trap 'rm -rf "$tmp" "$csv.tmp.$$"' EXIT
k=0
# the columns the benchmark adds after the trainers' schema; upgrade_csv CSV HEADER: a CSV
# written before them (HEADER alone) gets them, empty, on its old rows; a CSV with another
# header is refused
BENCH_COLS=other_load_cores,disturbed
upgrade_csv() {
  [ -s "$1" ] || return 0
  local h; h=$(head -n 1 "$1")
  [ "$h" != "$2,$BENCH_COLS" ] || return 0
  if [ "$h" = "$2" ]; then
    awk -v c="$BENCH_COLS" 'NR == 1 { print $0 "," c; next } { print $0 ",," }' "$1" >"$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"
    echo "openmp-bench: $1: added the columns $BENCH_COLS (empty on its old rows)" >&2
  else
    echo "openmp-bench: $1: a header that is not the results schema plus $BENCH_COLS: not appending to it (move it away)" >&2
    exit 2
  fi
}
run_one() {   # label, T, command... (writing its CSV row to $tmp/row.csv): one run under the lock
  local label=$1 T=$2; shift 2
  k=$((k + 1))
  local out attempt other flag="" disturbed=0 b0 t0 b1 t1 c0 c1 w0
  for attempt in $(seq 1 "$tries"); do
    # up to --idle-wait s for 2 s with the CPUs >= 97 % idle; a busy machine is measured anyway
    [ "$tries" -eq 1 ] || idle_or_busy "$idle_wait" 2 97 || true
    rm -f "$tmp/row.csv"
    read -r b0 t0 < <(cpu_ticks); children_cpu >"$tmp/c0"; w0=$(date +%s.%N)
    # shellcheck disable=SC2046
    if ! out=$(flock "$LOCK" $(launch "$T") "$@" --csv "$tmp/row.csv" 2>&1); then
      printf '%s\n' "$out" >&2
      echo "openmp-bench: run $k/$total ($label) failed" >&2
      exit 1
    fi
    read -r b1 t1 < <(cpu_ticks); children_cpu >"$tmp/c1"; c0=$(cat "$tmp/c0"); c1=$(cat "$tmp/c1")
    # other load, in cores: CPU time not ours over the wall time of the attempt
    other=$(awk -v b="$((b1 - b0))" -v hz="$hz" -v c="$(awk -v a="$c0" -v z="$c1" 'BEGIN { print z - a }')" \
                -v w="$(awk -v a="$w0" -v z="$(date +%s.%N)" 'BEGIN { print z - a }')" \
                'BEGIN { o = (b / hz - c) / w; printf "%.3f", o < 0 ? 0 : o }')
    disturbed=$(awk -v o="$other" -v m="$max_other" 'BEGIN { print (o > m) ? 1 : 0 }')
    [ "$disturbed" = 1 ] || { flag=""; break; }
    flag=" [disturbed: other load $other cores]"
    if [ "$tries" -eq 1 ] && [ "$BENCH_BUSY" = 0 ]; then   # no idle check: say it once here
      BENCH_BUSY=1
      echo "bench: the machine is busy ($(awk -v o="$other" 'BEGIN { printf "%d", o * 100 }')% of a core of outside load); measuring anyway, rows marked disturbed" >&2
    fi
  done
  # the row, marked: other_load_cores, disturbed
  awk -v o="$other" -v d="$disturbed" -v c="$BENCH_COLS" 'NR == 1 { print $0 "," c; next } { print $0 "," o "," d }' \
    "$tmp/row.csv" >"$tmp/row-marked.csv"
  upgrade_csv "$csv" "$(head -n 1 "$tmp/row.csv")"
  append_rows "$tmp/row-marked.csv" "$csv"   # an interrupted run never leaves a half-written row
  printf '[%d/%d] %-22s %s  [other load %s%s]%s\n' "$k" "$total" "$label" \
    "$(printf '%s\n' "$out" | tail -n 1 | sed 's/ | csv .*//' | cut -c1-130)" "$other" \
    "$([ "$attempt" -gt 1 ] && echo ", attempt $attempt")" "$flag"
}
for r in $(seq 1 "$runs"); do
  for b in "${batch_list[@]}"; do
    run_one "serial b$b" 1 serial/serial --batch "$b" "${common[@]}"
    for T in "${thread_list[@]}"; do
      for v in "${VARIANTS[@]}"; do
        # shellcheck disable=SC2086  # the variant's flags, e.g. "--accum loop"
        run_one "openmp $v T$T b$b" "$T" openmp/openmp ${VARIANT_FLAGS[$v]} --threads "$T" --batch "$b" "${common[@]}"
      done
    done
    if [ $torch = 1 ]; then
      for T in "${thread_list[@]}"; do
        run_one "pytorch T$T b$b" "$T" "$PY" bench/torch_mlp.py --threads "$T" --batch "$b" "${common[@]}"
      done
    fi
  done
done

echo
summarize
