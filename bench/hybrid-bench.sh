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
# speedup = serial's epoch time / the configuration's.
#
# Usage: bench/hybrid-bench.sh [--runs R] [--epochs E] [--batches "64 512"] [--csv FILE]
#                              [--data DIR] [--train N]
#   defaults: 3 runs, 4 epochs, batches "64 512", results/bench-hybrid.csv, data/fashion, all samples
# Exit status: 0; 1 when a run fails; 2 on a usage error or a missing prerequisite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

runs=3 epochs=4 batches="64 512" csv=results/bench-hybrid.csv data=data/fashion train=0
LOCK=/tmp/partrain-bench.lock
CONFIGS=(1x1 1x2 2x1 2x2)
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --csv) csv=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --train) train=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "hybrid-bench.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
for b in serial/serial hybrid/hybrid; do
  [ -x $b ] || { echo "hybrid-bench.sh: $b not built (make all)" >&2; exit 2; }
done
command -v flock >/dev/null || { echo "hybrid-bench.sh: flock missing (apt-get install util-linux)" >&2; exit 2; }
cores=$(nproc)
mkdir -p "$(dirname "$csv")"
tmp=$(mktemp /tmp/hybrid-bench-XXXXXX.csv); rm -f "$tmp"
trap 'rm -f "$tmp" "$csv.tmp.$$"' EXIT
common=(--data "$data" --epochs "$epochs" --quiet)
[ "$train" = 0 ] || common+=(--train "$train")

for run in $(seq 1 "$runs"); do
  for batch in $batches; do
    echo "run $run/$runs, batch $batch: serial" >&2
    flock $LOCK taskset -c 1 serial/serial "${common[@]}" --batch "$batch" --csv "$tmp" >/dev/null
    for pt in "${CONFIGS[@]}"; do
      p=${pt%x*} t=${pt#*x}
      policy=(); [ $((p * t)) -le "$cores" ] || policy=(OMP_WAIT_POLICY=passive)
      echo "run $run/$runs, batch $batch: hybrid $pt ${policy[*]:-}" >&2
      flock $LOCK env "${policy[@]}" scripts/mpirun.sh --bind-to-none "$p" hybrid/hybrid "${common[@]}" \
        --batch "$batch" --threads "$t" --sync allreduce --csv "$tmp" >/dev/null || { echo "hybrid-bench.sh: hybrid $pt failed" >&2; exit 1; }
    done
  done
done
# all rows at once: the old file plus the new rows go to a temporary file next to it, which
# is renamed over it, so an interrupted run leaves the CSV as it was, never half-written
{ if [ -s "$csv" ]; then cat "$csv"; tail -n +2 "$tmp"; else cat "$tmp"; fi; } >"$csv.tmp.$$" &&
  mv -f "$csv.tmp.$$" "$csv"

awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
  { k = $c["batch"] SUBSEP ($c["program"] == "serial" ? "serial" : $c["ranks"] "x" $c["threads"]);
    n[k]++; e[k, n[k]] = $c["epoch_seconds_median"]; m[k, n[k]] = $c["comm_seconds"]; s[k, n[k]] = $c["sync_seconds"];
    w[k] = $c["omp_wait_policy"]; b[$c["batch"]] = 1; ds = $c["dataset"] " " $c["train_n"] " samples" }
  function med(a, k, cnt,   i, j, t, v) { for (i = 1; i <= cnt; i++) v[i] = a[k, i] + 0;
    for (i = 1; i <= cnt; i++) for (j = i + 1; j <= cnt; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return cnt % 2 ? v[(cnt + 1) / 2] : (v[cnt / 2] + v[cnt / 2 + 1]) / 2 }
  END {
    split("serial 1x1 1x2 2x1 2x2", cfg, " ")
    for (bb in b) {
      printf "\n%s, batch %s, medians of %d runs (epoch = median of epochs 2..E):\n", ds, bb, n[bb SUBSEP "serial"]
      printf "%-7s %-16s %10s %10s %12s %9s\n", "P x T", "OMP_WAIT_POLICY", "epoch s", "comm s", "barriers s", "speedup"
      base = med(e, bb SUBSEP "serial", n[bb SUBSEP "serial"])
      for (i = 1; i <= 5; i++) { k = bb SUBSEP cfg[i]; if (!n[k]) continue
        t = med(e, k, n[k])
        printf "%-7s %-16s %10.3f %10.3f %12.3f %8.2fx\n", cfg[i], (w[k] == "" ? "unset" : w[k]), t, med(m, k, n[k]), med(s, k, n[k]), base / t }
    }
  }' "$tmp"
