#!/usr/bin/env bash
# bench/hybrid-bench.sh — hybrid/hybrid (P ranks x T threads) against serial, side by side.
#
# On full Fashion-MNIST (60k) with the default MLP, for each batch (default 64 and 512):
# serial/serial (pinned to one core with taskset) and hybrid/hybrid with P x T = the
# pairs of C cores (scripts/lib.sh, docs/sweeps.md: 1x1, every P*T = C point, 1xC and Cx1
# among them, and the squarest P*T = 2C one; on 2 cores 1x1 1x2 2x1 2x2) or --grid L
# (--sync allreduce), launched by scripts/mpirun.sh --bind-to-none. OMP_WAIT_POLICY:
# unset (the runtime's default) while P*T <= the real cores, passive above; the table and the CSV column
# omp_wait_policy say which. The set is repeated R times, interleaved, and every run holds
# /tmp/partrain-bench.lock (flock) so no other benchmark overlaps it (bench_run in
# scripts/lib.sh). Every run gives a row: the trainers' schema plus other_load_cores (the
# other processes' load during the run, in cores) and disturbed (1 when it exceeded
# --max-other; the machine being busy is said once); the rows of the whole invocation are
# appended to the CSV at the end, at once (a CSV written before the two columns gets
# them, empty on its old rows). Then, per batch, the medians over the R runs of each
# run's epoch_seconds_median (median of epochs 2..E), comm_seconds (inside MPI calls per
# epoch, mean over ranks) and sync_seconds (barrier waits summed over a rank's threads),
# and the speedup = serial's epoch time / the configuration's (scripts/bench_tables.py
# hybrid; a "*" after a runs count: the median includes disturbed rows); on 2 cores, the
# verdict on issue 32's target: the best P x T = 2 configuration >= 1.8x serial, any batch.
# The per-round core bound (as bench/openmp-bench.sh's): when C >= 2 and C is at most the
# real cores, each round also runs C copies of serial at once, one per core (bench/corun.sh,
# no row); C x serial's epoch alone / the slowest copy's is what the cores allowed, and
# each P x T = C configuration's speedup is given as a fraction of its round's bound, every
# round also in CSV-bounds.csv (bench-hybrid-bounds.csv) for the report's first page.
#
# Usage: bench/hybrid-bench.sh [--runs R] [--epochs E] [--batches "64 512"] [--csv FILE]
#                              [--data DIR] [--train N] [--tries N] [--max-other C] [--idle-wait S]
#                              [--grid PxT,PxT] [--cores N]
#   --grid L       the P x T points, e.g. 1x8,2x4,8x1 (default: the pairs of C cores)
#   --cores N      C = N for the default points and the words (passive, oversubscription:
#                  the real nproc)
#   defaults: 3 runs, 4 epochs, batches "64 512", results/bench-hybrid.csv, data/fashion, all samples
#   --tries N, --max-other C, --idle-wait S   as in bench/mpi-bench.sh: attempts per run while
#                  other load disturbs it (default 1), the other load in cores above which a
#                  run is disturbed (default 0.05), the idle wait before a run when N > 1 (30 s)
# Exit status: 0 (also on a busy machine); 1 when a run fails; 2 on a usage error or a
# missing prerequisite; each with its reason on stderr.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

runs=3 epochs=4 batches="64 512" csv=results/bench-hybrid.csv data=data/fashion train=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runs)    need_value "$@"; runs=$2; shift 2 ;;
    --epochs)  need_value "$@"; epochs=$2; shift 2 ;;
    --batches) need_value "$@"; batches=$2; shift 2 ;;
    --csv)     need_value "$@"; csv=$2; shift 2 ;;
    --data)    need_value "$@"; data=$2; shift 2 ;;
    --train)   need_value "$@"; train=$2; shift 2 ;;
    --tries|--max-other|--idle-wait) need_value "$@"; bench_load_option "$1" "$2"; shift 2 ;;
    --grid|--cores) need_value "$@"; sweep_option "$1" "$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for v in runs epochs; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--$v: not a positive integer: '${!v}'"; done
[[ $train =~ ^[0-9]+$ ]] || die "--train: not a non-negative integer: '$train'"
for b in $batches; do [[ $b =~ ^[1-9][0-9]*$ ]] || die "--batches: not a positive integer: '$b'"; done
[ "$csv" != none ] || die "--csv none: the table is built from the rows; give a file"
sweep_setup full
read -r -a CONFIGS <<<"$SWEEP_PAIRS"
need_built serial/serial hybrid/hybrid
need_tools mpirun flock taskset
[ -d "$data" ] || die "$data missing (run: scripts/get-data.sh)"
bench_check_csv "$csv"
bench_corun_init "${csv%.csv}-bounds.csv"   # the per-round core bound: BENCH_CORUN copies of serial
cores=$(nproc)
common=(--data "$data" --epochs "$epochs" --quiet)
[ "$train" = 0 ] || common+=(--train "$train")

bench_tmp
rows=$BENCH_TMP/rows.csv   # this invocation's rows, appended to the CSV at the end
BENCH_CSV=$rows BENCH_TOTAL=$(( runs * $(wc -w <<<"$batches") * (1 + (BENCH_CORUN > 0) + ${#CONFIGS[@]}) )) BENCH_WIDTH=16
bench_cpu_line
echo "hybrid-bench: $data$([ "$train" = 0 ] || echo " (first $train)"), batches $batches, $epochs epochs x $runs runs, P x T ${CONFIGS[*]}," \
     "$SWEEP_CORES cores$([ "$SWEEP_CORES" = "$cores" ] || echo " ($cores real)"); rows -> $csv"
for _ in $(seq 1 "$runs"); do
  for batch in $batches; do
    bench_run "serial b$batch" taskset -c $((cores > 1 ? 1 : 0)) serial/serial "${common[@]}" --batch "$batch"
    bench_corun "$batch" serial/serial "${common[@]}" --batch "$batch" --csv none   # the round's core bound, no row
    for pt in "${CONFIGS[@]}"; do
      p=${pt%x*} t=${pt#*x}
      policy=(); [ $((p * t)) -le "$cores" ] || policy=(OMP_WAIT_POLICY=passive)
      bench_run "hybrid $pt b$batch" env "${policy[@]}" scripts/mpirun.sh --bind-to-none "$p" hybrid/hybrid "${common[@]}" \
        --batch "$batch" --threads "$t" --sync allreduce
    done
  done
done
bench_append "$rows" "$csv"   # all rows at once: an interrupted run leaves the CSV as it was

"$PY" scripts/bench_tables.py hybrid "$rows" "${BENCH_BOUND_ARGS[@]}"
