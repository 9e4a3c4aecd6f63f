#!/usr/bin/env bash
# bench/ab-speed.sh — is this tree as fast as another commit? Old and new binaries,
# side by side, alternating (A B A B ...), so that the machine's slow and fast stretches
# fall on both alike; per trainer the median over the pairs of new/old epoch time.
#
# Usage: bench/ab-speed.sh [--base REV] [--pairs N] [--epochs E] [--train N] [--max-other C]
#   --base REV   the commit to compare against [HEAD~1]; built in a temporary git worktree
#   --pairs N    alternating old/new pairs per configuration [5]
#   --epochs E   epochs per run; each run's epoch_seconds_median (epochs 2..E) is used [4]
#   --train N    Fashion-MNIST training samples per run [20000]
#   --max-other C  other load in cores above which a run is marked disturbed [0.05]
# Configurations: serial; openmp --accum loop --threads 2; mpi --sync allreduce with
# 2 ranks; cnn 1 rank x 1 thread (the ones whose speed a kernel refactor could change).
# Every run holds the benchmark lock and its other load is measured (bench_run in
# scripts/lib.sh: a busy machine is said once, and measured anyway).
# Output: one line per run and per pair, then a table "trainer | old (s) | new (s) |
# new/old median of pair ratios | disturbed runs"; a CSV of every run in
# results/ab-speed.csv: trainer,kind,pair,epoch_seconds_median,other_load_cores,disturbed
# (kind old|new; other_load_cores: the other processes' load during the run, in cores;
# disturbed: 1 when it exceeded --max-other).
# Exit status: 0 (a benchmark reports, it does not judge; also on a busy machine), 2 on a
# usage error, 1 when a build or run fails; each with its reason on stderr.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh   # die, need_value, bench_run; the ERR trap: a failing command names itself

base=HEAD~1 pairs=5 epochs=4 train=20000
while [ $# -gt 0 ]; do
  case $1 in
    --base) need_value "$@"; base=$2; shift 2 ;;
    --pairs) need_value "$@"; pairs=$2; shift 2 ;;
    --epochs) need_value "$@"; epochs=$2; shift 2 ;;
    --train) need_value "$@"; train=$2; shift 2 ;;
    --max-other) need_value "$@"; bench_load_option "$1" "$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $pairs =~ ^[1-9][0-9]*$ && $epochs =~ ^[2-9][0-9]*$ && $train =~ ^[1-9][0-9]*$ ]] ||
  die "--pairs and --train must be positive integers, --epochs at least 2"
rev=$(git rev-parse --verify --quiet "$base^{commit}") || die "--base $base: no such commit"
[ -d data/fashion ] || die "data/fashion missing (make data)"
need_tools flock taskset mpirun

old=$(mktemp -d /tmp/partrain-ab-XXXXXX)
# shellcheck disable=SC2016  # $old: expanded at exit
bench_at_exit 'git worktree remove --force "$old" >/dev/null 2>&1 || rm -rf "$old"'
echo "ab-speed: building $base (${rev:0:10}) in $old and this tree"
git worktree add --detach -q "$old" "$rev"
make -s -C "$old" serial/serial openmp/openmp mpi/mpi cnn/cnn >/dev/null || { echo "ab-speed: building $base failed" >&2; exit 1; }
make -s serial/serial openmp/openmp mpi/mpi cnn/cnn >/dev/null || { echo "ab-speed: building this tree failed" >&2; exit 1; }

csv=results/ab-speed.csv
mkdir -p results
echo "trainer,kind,pair,epoch_seconds_median,$BENCH_COLS" >"$csv"
common=(--data data/fashion --train "$train" --test 1000 --epochs "$epochs" --quiet)
bench_tmp
BENCH_CSV=$BENCH_TMP/run.csv BENCH_TOTAL=$((4 * 2 * pairs)) BENCH_WIDTH=26 BENCH_CUT=90
run() {   # TRAINER DIR KIND PAIR: one run (bench_run), its row appended to $csv; EPOCH: its epoch median
  local t=$1 d=$2 cmd=()
  case $t in
    serial) cmd=(taskset -c 0 "$d/serial/serial") ;;
    openmp-loop-T2) cmd=(env OMP_WAIT_POLICY= "$d/openmp/openmp" --threads 2 --accum loop) ;;
    mpi-allreduce-P2) cmd=(scripts/mpirun.sh 2 "$d/mpi/mpi" --sync allreduce) ;;
    cnn-1x1) cmd=(scripts/mpirun.sh 1 "$d/cnn/cnn" --threads 1) ;;
  esac
  rm -f "$BENCH_CSV"
  bench_run "$t $3" "${cmd[@]}" "${common[@]}" </dev/null
  EPOCH=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "epoch_seconds_median") c = i; next } { print $c }' "$BENCH_CSV")
  echo "$t,$3,$4,$EPOCH,$BENCH_OTHER,$BENCH_DISTURBED" >>"$csv"
}
for t in serial openmp-loop-T2 mpi-allreduce-P2 cnn-1x1; do
  for p in $(seq 1 "$pairs"); do
    run $t "$old" old "$p"; a=$EPOCH
    run $t . new "$p"; b=$EPOCH
    printf '%-18s pair %d: old %.4f s  new %.4f s  new/old %.3f\n' "$t" "$p" "$a" "$b" "$(echo "$b / $a" | bc -l)"
  done
done
echo
echo "| trainer | old epoch (s, median) | new epoch (s, median) | new/old (median of $pairs pair ratios) | disturbed runs |"
echo "|---|---:|---:|---:|---:|"
awk -F, 'NR > 1 { v[$1 "," $2 "," $3] = $4; t[$1] = 1; n[$1] = ($3 > n[$1] ? $3 : n[$1]); dist[$1] += ($6 == 1) }
  function median(a, k,   i, j, x) { for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
  END { split("serial openmp-loop-T2 mpi-allreduce-P2 cnn-1x1", order, " ")
    for (o = 1; o <= 4; o++) { tr = order[o]; if (!(tr in t)) continue; k = n[tr]
      for (p = 1; p <= k; p++) { A[p] = v[tr ",old," p]; B[p] = v[tr ",new," p]; R[p] = B[p] / A[p] }
      printf "| %s | %.4f | %.4f | %.3f | %d of %d |\n", tr, median(A, k), median(B, k), median(R, k), dist[tr], 2 * k } }' "$csv"
echo "(every run: $csv)"
