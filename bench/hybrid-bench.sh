#!/usr/bin/env bash
# bench/hybrid-bench.sh — hybrid/hybrid (P ranks x T threads) against serial, side by side.
#
# On full Fashion-MNIST (60k) with the default MLP, for each batch (default 64 and 512):
# serial/serial (pinned to one core with taskset) and hybrid/hybrid with
# P x T in {1x1, 1x2, 2x1, 2x2} (--sync allreduce), launched by
# scripts/mpirun.sh --bind-to-none. OMP_WAIT_POLICY: unset (the runtime's default) while
# P*T <= the cores, passive above (P x T = 2x2 on 2 cores); the table and the CSV column
# omp_wait_policy say which. The set is repeated R times, interleaved, and every run holds
# /tmp/partrain-bench.lock (flock) so no other benchmark overlaps it. Every run appends a
# row to the CSV; then, per batch, the medians over the R runs of each run's
# epoch_seconds_median (median of epochs 2..E), comm_seconds (inside MPI calls per epoch,
# mean over ranks) and sync_seconds (barrier waits summed over a rank's threads), and the
# speedup = serial's epoch time / the configuration's (scripts/bench_tables.py hybrid).
#
# Usage: bench/hybrid-bench.sh [--runs R] [--epochs E] [--batches "64 512"] [--csv FILE]
#                              [--data DIR] [--train N]
#   defaults: 3 runs, 4 epochs, batches "64 512", results/bench-hybrid.csv, data/fashion, all samples
# Exit status: 0; 1 when a run fails; 2 on a usage error or a missing prerequisite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. bench/lib.sh

runs=3 epochs=4 batches="64 512" csv=results/bench-hybrid.csv data=data/fashion train=0
CONFIGS=(1x1 1x2 2x1 2x2)
while [ $# -gt 0 ]; do
  case "$1" in
    --runs)    need_value "$@"; runs=$2; shift 2 ;;
    --epochs)  need_value "$@"; epochs=$2; shift 2 ;;
    --batches) need_value "$@"; batches=$2; shift 2 ;;
    --csv)     need_value "$@"; csv=$2; shift 2 ;;
    --data)    need_value "$@"; data=$2; shift 2 ;;
    --train)   need_value "$@"; train=$2; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
need_built serial/serial hybrid/hybrid
need_tools flock taskset
cores=$(nproc)
mkdir -p "$(dirname "$csv")"
tmp=$(mktemp /tmp/hybrid-bench-XXXXXX.csv); rm -f "$tmp"
trap 'rm -f "$tmp" "$csv.tmp.$$"' EXIT
common=(--data "$data" --epochs "$epochs" --quiet)
[ "$train" = 0 ] || common+=(--train "$train")

for run in $(seq 1 "$runs"); do
  for batch in $batches; do
    echo "run $run/$runs, batch $batch: serial" >&2
    flock "$LOCK" taskset -c 1 serial/serial "${common[@]}" --batch "$batch" --csv "$tmp" >/dev/null
    for pt in "${CONFIGS[@]}"; do
      p=${pt%x*} t=${pt#*x}
      policy=(); [ $((p * t)) -le "$cores" ] || policy=(OMP_WAIT_POLICY=passive)
      echo "run $run/$runs, batch $batch: hybrid $pt ${policy[*]:-}" >&2
      flock "$LOCK" env "${policy[@]}" scripts/mpirun.sh --bind-to-none "$p" hybrid/hybrid "${common[@]}" \
        --batch "$batch" --threads "$t" --sync allreduce --csv "$tmp" >/dev/null || { echo "$BENCH_NAME: hybrid $pt failed" >&2; exit 1; }
    done
  done
done
append_rows "$tmp" "$csv"   # all rows at once: an interrupted run leaves the CSV as it was

"$PY" scripts/bench_tables.py hybrid "$tmp"
