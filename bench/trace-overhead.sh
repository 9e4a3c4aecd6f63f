#!/usr/bin/env bash
# bench/trace-overhead.sh — what --trace costs: runs without and with --trace (every step
# traced), side by side, alternating (off on off on ...), so that the machine's slow and
# fast stretches fall on both alike; per trainer the median over the pairs of on/off
# epoch time (docs/tracing.md; the issue's bound: 1.02).
#
# Usage: bench/trace-overhead.sh [--pairs N] [--epochs E] [--train N] [--data DIR] [--max-other C]
#                               [--cores N]
#   --pairs N    alternating off/on pairs per trainer [5]
#   --epochs E   epochs per run; each run's epoch_seconds_median (epochs 2..E) is used [2]
#   --train N    training samples per run (0: all) [0]
#   --data DIR   IDX data [data/fashion]
#   --max-other C  other load in cores above which a run is marked disturbed [0.05]
#   --cores N    C = N (default: the cores, scripts/lib.sh)
# Trainers: serial; openmp --accum critical --threads C; mpi --sync allreduce with C ranks
# (OMP_WAIT_POLICY=passive and oversubscription above the real cores).
# Every run holds the benchmark lock and its other load is measured (bench_run in
# scripts/lib.sh: a busy machine is said once, and measured anyway).
# Output: the CPU model, one line per run and per pair, then a table "trainer | off (s) |
# on (s) | on/off median of pair ratios | disturbed runs"; every run in
# results/trace-overhead.csv: trainer,kind,pair,epoch_seconds_median,other_load_cores,disturbed
# Exit status: 0 (a benchmark reports, it does not judge), 2 on a usage error, 1 when a
# build or run fails; each with its reason on stderr.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh   # die, need_value, bench_run; the ERR trap: a failing command names itself

pairs=5 epochs=2 train=0 data=data/fashion
while [ $# -gt 0 ]; do
  case $1 in
    --pairs) need_value "$@"; pairs=$2; shift 2 ;;
    --epochs) need_value "$@"; epochs=$2; shift 2 ;;
    --train) need_value "$@"; train=$2; shift 2 ;;
    --data) need_value "$@"; data=$2; shift 2 ;;
    --max-other) need_value "$@"; bench_load_option "$1" "$2"; shift 2 ;;
    --cores) need_value "$@"; sweep_option "$1" "$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $pairs =~ ^[1-9][0-9]*$ && $epochs =~ ^[1-9][0-9]*$ && $train =~ ^[0-9]+$ ]] ||
  die "--pairs and --epochs must be positive integers, --train a number (0: all)"
[ -d "$data" ] || die "--data $data: no such directory (make data)"
need_tools flock taskset mpirun
sweep_setup full
C=$SWEEP_CORES
passive=(); [ "$C" -le "$(nproc)" ] || passive=(env OMP_WAIT_POLICY=passive)   # above the real cores: threads sleep
make -s serial/serial openmp/openmp mpi/mpi >/dev/null || { echo "trace-overhead: the build failed" >&2; exit 1; }

echo "trace-overhead: CPU $(cpu_kind), $(nproc) cores, C = $C"
csv=results/trace-overhead.csv
mkdir -p results
echo "trainer,kind,pair,epoch_seconds_median,$BENCH_COLS" >"$csv"
common=(--data "$data" --epochs "$epochs" --quiet)
[ "$train" = 0 ] || common+=(--train "$train" --test 1000)
bench_tmp
BENCH_CSV=$BENCH_TMP/run.csv BENCH_TOTAL=$((3 * 2 * pairs)) BENCH_WIDTH=26 BENCH_CUT=90
run() {   # TRAINER KIND PAIR: one run (bench_run), its row appended to $csv; EPOCH: its epoch median
  local t=$1 cmd=() trace=()
  case $t in
    serial) cmd=(taskset -c 0 serial/serial) ;;
    openmp-critical-T*) cmd=("${passive[@]}" openmp/openmp --threads "$C" --accum critical) ;;
    mpi-allreduce-P*) cmd=(scripts/mpirun.sh "$C" mpi/mpi --sync allreduce) ;;
  esac
  [ "$2" = off ] || trace=(--trace "$BENCH_TMP/trace.json" --trace-steps 100000000)
  rm -f "$BENCH_CSV" "$BENCH_TMP/trace.json"
  bench_run "$t $2" "${cmd[@]}" "${common[@]}" "${trace[@]}" </dev/null
  EPOCH=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "epoch_seconds_median") c = i; next } { print $c }' "$BENCH_CSV")
  echo "$t,$2,$3,$EPOCH,$BENCH_OTHER,$BENCH_DISTURBED" >>"$csv"
}
trainers="serial openmp-critical-T$C mpi-allreduce-P$C"
for t in $trainers; do
  for p in $(seq 1 "$pairs"); do
    run $t off "$p"; a=$EPOCH
    run $t on "$p"; b=$EPOCH
    printf '%-20s pair %d: off %.4f s  on %.4f s  on/off %.3f\n' "$t" "$p" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { print b / a }')"
  done
done
echo
echo "| trainer | off epoch (s, median) | on epoch (s, median) | on/off (median of $pairs pair ratios) | disturbed runs |"
echo "|---|---:|---:|---:|---:|"
awk -F, -v trainers="$trainers" 'NR > 1 { v[$1 "," $2 "," $3] = $4; t[$1] = 1; n[$1] = ($3 > n[$1] ? $3 : n[$1]); dist[$1] += ($6 == 1) }
  function median(a, k,   i, j, x) { for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
  END { split(trainers, order, " ")
    for (o = 1; o <= 3; o++) { tr = order[o]; if (!(tr in t)) continue; k = n[tr]
      for (p = 1; p <= k; p++) { A[p] = v[tr ",off," p]; B[p] = v[tr ",on," p]; R[p] = B[p] / A[p] }
      printf "| %s | %.4f | %.4f | %.3f | %d of %d |\n", tr, median(A, k), median(B, k), median(R, k), dist[tr], 2 * k } }' "$csv"
echo "(every run: $csv)"
