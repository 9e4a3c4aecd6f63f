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
# so each run is checked (bench_run in scripts/lib.sh): the CPU time the machine spent
# outside the run (/proc/stat minus the run's own CPU time) must stay below --max-other
# cores on average, else the run is repeated (up to --tries times, each attempt after
# waiting up to --idle-wait S (30) seconds for 2 idle seconds), and a run that never got a
# quiet machine is kept but flagged "[disturbed]" in its line and in its row. A machine
# that never gets idle does not stop the benchmark: it says so once ("bench: the machine
# is busy (N% of a core of outside load); measuring anyway, rows marked disturbed") and
# measures. Accepted rows are appended to the CSV with two columns after the trainers'
# schema: other_load_cores (the other load during the run, in cores) and disturbed (1
# when it exceeded --max-other; a CSV written before these columns gets them, empty on
# its old rows); then per batch size a table of the median over the R runs of each run's
# epoch_seconds_median (itself the median of epochs 2..E), the median sync_seconds (per
# epoch, summed over threads: time in the critical section, or waiting at barriers, as
# each mode counts it), the speedup vs serial, and how many times faster than PyTorch's
# best thread count; and verdict lines
# for the targets (best mode at T = 2: >= 1.85x serial at batch 64 and at batch 512;
# >= 2.5x faster than PyTorch's best); a "*" after a runs count marks a median that
# includes disturbed rows. The tables: scripts/bench_tables.py openmp.
# The per-round core bound: when C >= 2 (and C is at most the real cores), each round also
# runs C copies of serial at once, copy i on core i (bench/corun.sh; no row, its epochs are
# read from the output): C x serial's epoch alone / the slowest copy's epoch is what C
# cores allowed in that round, since no split of one step over C cores can beat C
# independent whole steps. The table after the runs gives each mode's speedup at T = C as
# a fraction of its round's bound; every round's bound and speedup also go to
# CSV-bounds.csv (bench-openmp-bounds.csv) for the report's first page.
#
# Usage: bench/openmp-bench.sh [--epochs E] [--runs R] [--batches B,B] [--threads T,T]
#                              [--cores N] [--csv FILE] [--data DIR] [--train N] [--no-torch] [--quick]
#                              [--tries N] [--max-other C] [--idle-wait S]
#                              [--report-only [--since ISO]]
#   --epochs E     epochs per run (default 4: the median is over epochs 2..4)
#   --runs R       repetitions of the whole set (default 3)
#   --batches L    mini-batch sizes (default 64,512)
#   --threads L    thread counts for openmp and PyTorch (default 1 and C, the cores:
#                  nproc, or --cores N / PARTRAIN_CORES; scripts/lib.sh, docs/sweeps.md);
#                  --threads-list L is the same option
#   --cores N      C = N for the default list and the words; runs above the real nproc
#                  still get OMP_WAIT_POLICY=passive and share the real cores
#   --csv FILE     where the rows go (default results/bench-openmp.csv)
#   --data DIR     data set (default data/fashion)
#   --train N      use the first N training samples (default all)
#   --no-torch     leave PyTorch out
#   --tries N      attempts per run when other load disturbed it (default 3; 1: one
#                  attempt, no idle wait, its load still measured and marked)
#   --max-other C  other processes' load tolerated during a run, in cores (default 0.05):
#                  above it the run is repeated or, on its last try, marked disturbed
#   --idle-wait S  seconds to wait for an idle machine before a run (default 30; once the
#                  machine was found busy, one 2 s check per run)
#   --report-only  run nothing: print the tables from the rows of --csv (with the same
#                  --epochs and --train) whose timestamp is >= --since ISO (default: all)
#   --quick        smoke test: --train 6400 --epochs 2 --runs 1 --tries 1
# Exit status: 0 (also on a busy machine); 1 when a run fails; 2 on a usage error or a
# missing prerequisite; each with its reason on stderr.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

epochs=4 runs=3 batches=64,512 threads="" csv=results/bench-openmp.csv data=data/fashion train=0 torch=1
report_only=0 since='' BENCH_TRIES=3
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs)  need_value "$@"; epochs=$2; shift 2 ;;
    --runs)    need_value "$@"; runs=$2; shift 2 ;;
    --batches) need_value "$@"; batches=$2; shift 2 ;;
    --threads|--threads-list) need_value "$@"; sweep_option --threads-list "$2"; threads=$2; shift 2 ;;
    --cores)   need_value "$@"; sweep_option "$1" "$2"; shift 2 ;;
    --csv)     need_value "$@"; csv=$2; shift 2 ;;
    --data)    need_value "$@"; data=$2; shift 2 ;;
    --train)   need_value "$@"; train=$2; shift 2 ;;
    --no-torch) torch=0; shift ;;
    --report-only) report_only=1; shift ;;
    --since)   need_value "$@"; since=$2; shift 2 ;;
    --tries|--max-other|--idle-wait) need_value "$@"; bench_load_option "$1" "$2"; shift 2 ;;
    --quick)   train=6400 epochs=2 runs=1 BENCH_TRIES=1; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
for v in epochs runs train; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "--$v: not a non-negative integer: '${!v}'"
done
[ "$epochs" -ge 1 ] && [ "$runs" -ge 1 ] || die "--epochs and --runs must be >= 1"
[[ $batches =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--batches: expected a list like 64,512: '$batches'"
sweep_setup full
if [ -z "$threads" ]; then threads=1; [ "$SWEEP_CORES" = 1 ] || threads=1,$SWEEP_CORES; fi
[ "$csv" != none ] || die "--csv none: the table is built from the CSV; give a file"
IFS=, read -r -a batch_list <<<"$batches"
IFS=, read -r -a thread_list <<<"$threads"

summarize() {   # the tables, from the rows of $csv with timestamp >= $since (ARGS: the bound's)
  "$PY" scripts/bench_tables.py openmp "$csv" --since "$since" --epochs "$epochs" --train "$train" "$@"
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
bench_check_csv "$csv"
bench_corun_init "${csv%.csv}-bounds.csv"   # the per-round core bound: BENCH_CORUN copies of serial

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
per_set=$(( 1 + (BENCH_CORUN > 0) + ${#VARIANTS[@]} * ${#thread_list[@]} + torch * ${#thread_list[@]} ))
total=$(( runs * ${#batch_list[@]} * per_set ))
bench_cpu_line
echo "openmp-bench: $data$([ "$train" -eq 0 ] || echo " (first $train samples)"), batches ${batches}, threads ${threads}, $epochs epochs x $runs runs," \
     "$SWEEP_CORES cores$([ "$SWEEP_CORES" = "$cores" ] || echo " ($cores real)"), torch $torch_version; rows -> $csv"
BENCH_TOTAL=$total BENCH_CSV=$csv
for r in $(seq 1 "$runs"); do
  for b in "${batch_list[@]}"; do
    # shellcheck disable=SC2046  # launch's words: env ... taskset -c CPUS
    bench_run "serial b$b" $(launch 1) serial/serial --batch "$b" "${common[@]}"
    bench_corun "$b" serial/serial --batch "$b" "${common[@]}" --csv none   # the round's core bound, no row
    for T in "${thread_list[@]}"; do
      for v in "${VARIANTS[@]}"; do
        # shellcheck disable=SC2046,SC2086  # launch's words; the variant's flags, e.g. "--accum loop"
        bench_run "openmp $v T$T b$b" $(launch "$T") openmp/openmp ${VARIANT_FLAGS[$v]} --threads "$T" --batch "$b" "${common[@]}"
      done
    done
    if [ $torch = 1 ]; then
      for T in "${thread_list[@]}"; do
        # shellcheck disable=SC2046
        bench_run "pytorch T$T b$b" $(launch "$T") "$PY" bench/torch_mlp.py --threads "$T" --batch "$b" "${common[@]}"
      done
    fi
  done
done

echo
summarize "${BENCH_BOUND_ARGS[@]}"
