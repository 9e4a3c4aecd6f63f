#!/usr/bin/env bash
# bench/mpi-sweep.sh — scaling sweeps of the MPI trainers (run_all.sh's mpi steps).
#
#   strong    mpi/mpi on a fixed training set (default all 60k of Fashion-MNIST) and a
#             fixed global batch (default 512), P = the ranks list, every --sync variant
#             (mpi/mpi --list-variants),
#             plus serial/serial once as the speedup baseline -> DIR/mpi-strong.csv
#   weak      mpi/mpi with the work per rank fixed: --train P*N (default N = 7,500, or
#             60,000 / the largest P when that is less: 60k samples at most) and
#             --batch-per-rank B (default 64: global batch 64P, the same number of steps
#             per epoch at every P), every --sync
#             -> DIR/mpi-weak.csv
#   pipeline  mpi/pipeline with P = 1, 2, 3 stages and M = 1, 4, 8 micro-batches at the
#             strong sweep's batch, printing the measured bubble beside (P-1)/(M+P-1)
#             -> DIR/mpi-pipeline.csv
# P above the core count runs oversubscribed (scripts/mpirun.sh adds --oversubscribe
# --mca mpi_yield_when_idle 1): the points above the cores show what sharing cores
# costs, not more parallelism. The ranks list (scripts/lib.sh, docs/sweeps.md): powers of
# two below R, R and 2R, R the rank slots (nproc, --cores N, a hostfile's slots or
# SLURM_NTASKS); --quick at most 4 of them. No OpenMP: OMP_WAIT_POLICY is irrelevant and
# unset.
# Every run holds /tmp/partrain-bench.lock (flock), so no other benchmark overlaps it;
# one run per configuration (bench/mpi-bench.sh takes medians of repeated runs). Each row
# is the trainers' schema plus other_load_cores (the other processes' load during the run,
# in cores) and disturbed (1 when it exceeded --max-other; bench_run in scripts/lib.sh,
# which says once when the machine is busy; a CSV written before these columns gets them,
# empty on its old rows).
# The figures are drawn from the CSVs alone by scripts/plot.sh (plots/mpi-scaling.png,
# plots/mpi-comm.png; their titles count the disturbed runs).
#
# Usage: bench/mpi-sweep.sh [--results DIR] [--ranks "1 2 4"] [--epochs E] [--batch B]
#                           [--per-rank N] [--per-rank-batch B] [--only strong,weak,pipeline]
#                           [--data DIR] [--train N] [--stages "1 2 3"] [--microbatches "1 4 8"]
#                           [--quick] [--tries N] [--max-other C] [--idle-wait S]
#                           [--ranks-list L] [--cores N] [--hostfile FILE]
#   --ranks L, --ranks-list L   the rank counts ("1 2 4" or 1,2,4; default the ranks list)
#   --cores N, --hostfile FILE  C = N, R from the hostfile's slots: the default list only
#   --results DIR   where the CSVs go (default results)
#   --train N       training samples of the strong and pipeline sweeps (default all)
#   --stages L      pipeline stages P (default "1 2 3"); --microbatches L: M (default "1 4 8")
#   --quick         smoke run: strong on 12,000 samples, weak with 1,500 per rank,
#                   at most 4 rank counts, 2 epochs
#   --tries N, --max-other C, --idle-wait S   as in bench/mpi-bench.sh: attempts per run while
#                   other load disturbs it (default 1), the other load in cores above which
#                   a run is disturbed (default 0.05), the idle wait before a run when N > 1
# Exit status: 0 (also on a busy machine); 1 when a run fails; 2 on a usage error or a
# missing prerequisite; each with its reason on stderr.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

results=results ranks="" quick=full epochs=3 batch=512 per_rank="" per_rank_batch=64 only=strong,weak,pipeline
data=data/fashion strong_train=0 stages="1 2 3" microbatches="1 4 8"
while [ $# -gt 0 ]; do
  case "$1" in
    --results)        need_value "$@"; results=$2; shift 2 ;;
    --ranks)          need_value "$@"; ranks=$2; shift 2 ;;
    --ranks-list)     need_value "$@"; sweep_option "$1" "$2"; ranks=${2//,/ }; shift 2 ;;
    --cores|--hostfile) need_value "$@"; sweep_option "$1" "$2"; shift 2 ;;
    --epochs)         need_value "$@"; epochs=$2; shift 2 ;;
    --batch)          need_value "$@"; batch=$2; shift 2 ;;
    --per-rank)       need_value "$@"; per_rank=$2; shift 2 ;;
    --per-rank-batch) need_value "$@"; per_rank_batch=$2; shift 2 ;;
    --only)           need_value "$@"; only=$2; shift 2 ;;
    --data)           need_value "$@"; data=$2; shift 2 ;;
    --train)          need_value "$@"; strong_train=$2; shift 2 ;;
    --stages)         need_value "$@"; stages=$2; shift 2 ;;
    --microbatches)   need_value "$@"; microbatches=$2; shift 2 ;;
    --quick)          strong_train=12000 per_rank=1500 quick=quick epochs=2; shift ;;
    --tries|--max-other|--idle-wait) need_value "$@"; bench_load_option "$1" "$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
sweep_setup $quick
[ -n "$ranks" ] || ranks=$SWEEP_RANKS
if [ -z "$per_rank" ]; then   # 60k samples at most at the largest P
  maxp=$(tr ' ' '\n' <<<"$ranks" | sort -n | tail -n 1 | tr -cd 0-9)
  per_rank=7500; [[ $maxp =~ ^[1-9][0-9]*$ ]] && [ $((per_rank * maxp)) -gt 60000 ] && per_rank=$((60000 / maxp))
fi
for v in epochs batch per_rank per_rank_batch; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v//_/-}: not a positive integer: '${!v}'"; done
for p in $ranks; do [[ $p =~ ^[1-9][0-9]*$ ]] || die "--ranks: not a positive integer: '$p'"; done
for p in $stages; do [[ $p =~ ^[1-9][0-9]*$ ]] || die "--stages: not a positive integer: '$p'"; done
for m in $microbatches; do [[ $m =~ ^[1-9][0-9]*$ ]] || die "--microbatches: not a positive integer: '$m'"; done
[[ $strong_train =~ ^[0-9]+$ ]] || die "--train: not a non-negative integer: '$strong_train'"
for part in ${only//,/ }; do [[ " strong weak pipeline " == *" $part "* ]] || die "--only: unknown part '$part'"; done
need_tools mpirun flock taskset
need_built serial/serial mpi/mpi mpi/pipeline
[ -d "$data" ] || die "$data missing (run: scripts/get-data.sh)"
load_variants mpi/mpi || exit 2
mkdir -p "$results"
wants() { [[ ",$only," == *",$1,"* ]]; }

run() {   # label, command...: one locked run (bench_run), the pipeline's bubble line shown too
  bench_run "$@"
  printf '%s\n' "$BENCH_OUT" | grep -E '^pipeline: measured bubble' | sed 's/^/  /' || true
}
nr=$(wc -w <<<"$ranks") nv=${#VARIANTS[@]}   # the runs of each part, for bench_run's [k/total]
BENCH_TOTAL=0 BENCH_WIDTH=34 BENCH_CUT=140
if wants strong; then BENCH_TOTAL=$((BENCH_TOTAL + 1 + nr * nv)); fi
if wants weak; then BENCH_TOTAL=$((BENCH_TOTAL + nr * nv)); fi
if wants pipeline; then BENCH_TOTAL=$((BENCH_TOTAL + $(wc -w <<<"$stages") * $(wc -w <<<"$microbatches"))); fi
echo "mpi-sweep: $data, $SWEEP_CORES cores$([ "$SWEEP_CORES" = "$(nproc)" ] || echo " ($(nproc) real)"), ranks $ranks, $epochs epochs per run; CSVs in $results/"

if wants strong; then
  csv=$results/mpi-strong.csv BENCH_CSV=$results/mpi-strong.csv
  bench_check_csv "$csv"
  args=(--data "$data" --batch "$batch" --epochs "$epochs" --quiet)
  [ "$strong_train" -eq 0 ] || args+=(--train "$strong_train")
  echo "strong scaling: $([ "$strong_train" -eq 0 ] && echo 'all training samples' || echo "$strong_train samples"), global batch $batch -> $csv"
  # pinned to the first CPU of this job's own CPU set (a Slurm job's set need not hold CPU 0)
  own_cpu=$(taskset -pc $$ | awk -F': ' '{ split($2, c, /[-,]/); print c[1] }')
  run "serial (1 core)" env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c "$own_cpu" serial/serial "${args[@]}"
  for p in $ranks; do
    # shellcheck disable=SC2086  # the variant's flags, e.g. "--sync allreduce"
    for s in "${VARIANTS[@]}"; do run "mpi $s P=$p" scripts/mpirun.sh "$p" mpi/mpi ${VARIANT_FLAGS[$s]} "${args[@]}"; done
  done
fi

if wants weak; then
  csv=$results/mpi-weak.csv BENCH_CSV=$results/mpi-weak.csv
  bench_check_csv "$csv"
  echo "weak scaling: $per_rank samples and $per_rank_batch rows per step per rank -> $csv"
  for p in $ranks; do
    for s in "${VARIANTS[@]}"; do
      # shellcheck disable=SC2086  # the variant's flags
      run "mpi $s P=$p (train $((per_rank * p)))" scripts/mpirun.sh "$p" mpi/mpi ${VARIANT_FLAGS[$s]} --data "$data" \
        --train $((per_rank * p)) --batch-per-rank "$per_rank_batch" --epochs "$epochs" --quiet
    done
  done
fi

if wants pipeline; then
  csv=$results/mpi-pipeline.csv BENCH_CSV=$results/mpi-pipeline.csv
  bench_check_csv "$csv"
  args=(--data "$data" --batch "$batch" --epochs "$epochs" --quiet)
  [ "$strong_train" -eq 0 ] || args+=(--train "$strong_train")
  echo "pipeline: batch $batch, P = ${stages// /, } stages x M = ${microbatches// /, } micro-batches -> $csv"
  for p in $stages; do
    for m in $microbatches; do run "pipeline P=$p M=$m" scripts/mpirun.sh "$p" mpi/pipeline --microbatches "$m" "${args[@]}"; done
  done
fi
echo "mpi-sweep: done; figures: scripts/plot.sh (plots/mpi-scaling.png, plots/mpi-comm.png)"
