#!/usr/bin/env bash
# bench/ab-speed.sh — is this tree as fast as another commit? Old and new binaries,
# side by side, alternating (A B A B ...), so that the machine's slow and fast stretches
# fall on both alike; per trainer the median over the pairs of new/old epoch time.
#
# Usage: bench/ab-speed.sh [--base REV] [--pairs N] [--epochs E] [--train N]
#   --base REV   the commit to compare against [HEAD~1]; built in a temporary git worktree
#   --pairs N    alternating old/new pairs per configuration [5]
#   --epochs E   epochs per run; each run's epoch_seconds_median (epochs 2..E) is used [4]
#   --train N    Fashion-MNIST training samples per run [20000]
# Configurations: serial; openmp --accum loop --threads 2; mpi --sync allreduce with
# 2 ranks; cnn 1 rank x 1 thread (the ones whose speed a kernel refactor could change).
# Output: one line per pair, then a table "trainer | old (s) | new (s) | new/old median
# of pair ratios"; a CSV of every run in results/ab-speed.csv (kind old|new).
# Exit status: 0 (a benchmark reports, it does not judge), 2 on a usage error, 1 when a
# build or run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
# never silent: a command that ends the script under set -e names itself first
set -E
# shellcheck disable=SC2154  # ab_err_rc: set by the trap itself
trap 'ab_err_rc=$?; [ "$BASHPID" != "$$" ] || echo "ab-speed: line $LINENO: $BASH_COMMAND failed (exit $ab_err_rc)" >&2' ERR

base=HEAD~1 pairs=5 epochs=4 train=20000
while [ $# -gt 0 ]; do
  case $1 in
    --base) base=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --train) train=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "ab-speed: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $pairs =~ ^[1-9][0-9]*$ && $epochs =~ ^[2-9][0-9]*$ && $train =~ ^[1-9][0-9]*$ ]] ||
  { echo "ab-speed: --pairs and --train must be positive integers, --epochs at least 2" >&2; exit 2; }
rev=$(git rev-parse --verify --quiet "$base^{commit}") || { echo "ab-speed: --base $base: no such commit" >&2; exit 2; }
[ -d data/fashion ] || { echo "ab-speed: data/fashion missing (make data)" >&2; exit 2; }

old=$(mktemp -d /tmp/partrain-ab-XXXXXX)
trap 'git worktree remove --force "$old" >/dev/null 2>&1 || rm -rf "$old"' EXIT
echo "ab-speed: building $base (${rev:0:10}) in $old and this tree"
git worktree add --detach -q "$old" "$rev"
make -s -C "$old" serial/serial openmp/openmp mpi/mpi cnn/cnn >/dev/null || { echo "ab-speed: building $base failed" >&2; exit 1; }
make -s serial/serial openmp/openmp mpi/mpi cnn/cnn >/dev/null || { echo "ab-speed: building this tree failed" >&2; exit 1; }

csv=results/ab-speed.csv
mkdir -p results
echo "trainer,kind,pair,epoch_seconds_median" >"$csv"
common=(--data data/fashion --train "$train" --test 1000 --epochs "$epochs" --quiet)
run() {   # run TRAINER DIR -> prints the epoch median
  local t=$1 d=$2 out
  out=$(mktemp)
  case $t in
    serial) taskset -c 0 "$d/serial/serial" "${common[@]}" --csv "$out.csv" ;;
    openmp-loop-T2) OMP_WAIT_POLICY= "$d/openmp/openmp" "${common[@]}" --threads 2 --accum loop --csv "$out.csv" ;;
    mpi-allreduce-P2) scripts/mpirun.sh 2 "$d/mpi/mpi" "${common[@]}" --sync allreduce --csv "$out.csv" ;;
    cnn-1x1) scripts/mpirun.sh 1 "$d/cnn/cnn" "${common[@]}" --threads 1 --csv "$out.csv" ;;
  esac >/dev/null </dev/null || { echo "ab-speed: $t ($d) failed" >&2; exit 1; }
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "epoch_seconds_median") c = i; next } { print $c }' "$out.csv"
  rm -f "$out" "$out.csv"
}
for t in serial openmp-loop-T2 mpi-allreduce-P2 cnn-1x1; do
  for p in $(seq 1 "$pairs"); do
    a=$(run $t "$old")
    b=$(run $t .)
    echo "$t,old,$p,$a" >>"$csv"; echo "$t,new,$p,$b" >>"$csv"
    printf '%-18s pair %d: old %.4f s  new %.4f s  new/old %.3f\n' "$t" "$p" "$a" "$b" "$(echo "$b / $a" | bc -l)"
  done
done
echo
echo "| trainer | old epoch (s, median) | new epoch (s, median) | new/old (median of $pairs pair ratios) |"
echo "|---|---:|---:|---:|"
awk -F, 'NR > 1 { v[$1 "," $2 "," $3] = $4; t[$1] = 1; n[$1] = ($3 > n[$1] ? $3 : n[$1]) }
  function median(a, k,   i, j, x) { for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
  END { split("serial openmp-loop-T2 mpi-allreduce-P2 cnn-1x1", order, " ")
    for (o = 1; o <= 4; o++) { tr = order[o]; if (!(tr in t)) continue; k = n[tr]
      for (p = 1; p <= k; p++) { A[p] = v[tr ",old," p]; B[p] = v[tr ",new," p]; R[p] = B[p] / A[p] }
      printf "| %s | %.4f | %.4f | %.3f |\n", tr, median(A, k), median(B, k), median(R, k) } }' "$csv"
echo "(every run: $csv)"
