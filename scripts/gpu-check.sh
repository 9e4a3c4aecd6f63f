#!/usr/bin/env bash
# scripts/gpu-check.sh — the CUDA trainer on a real GPU: build, check, time.
#
#   1. builds cuda/cuda (and serial/serial) with make; nvcc is required;
#   2. checks that a GPU is usable: cuda/cuda itself is run on a tiny set (exit status 3
#      = no usable device, its one-line message says why);
#   3. equivalence: every kernel the binary lists (`cuda/cuda --list-variants`: naive,
#      tiled16, tiled32, cublas, each with the flags that select it) trains the MNIST
#      digits (2,000 samples, 3 epochs, batch 64) and each epoch's mean loss must be within
#      1e-4 relative of serial/serial's (the device's expf/logf differ from the host's by
#      up to 2 ulp, and cuBLAS sums in its own order; everything else is serial's float
#      operations — see cuda/cuda.cu). With cuda/cuda-mpi built: the same with 2 ranks.
#   4. timing: each kernel on the full Fashion-MNIST training set (60,000 images), batch
#      64, 784-256-128-10, E epochs (median of epochs 2..E = the CSV's epoch_seconds_median),
#      R runs interleaved, the median over the runs; every run holds
#      /tmp/partrain-bench.lock (flock) so that no other benchmark runs at the same time.
#      Prints the table: epoch seconds, samples/s, GFLOP/s, time relative to cublas, and
#      the targets of issue #6 (tiled <= 0.15 s per epoch and within 3x of cublas on an
#      H100-class card; seed report 000: 0.23 s per 15k images).
#
# Usage: scripts/gpu-check.sh [--epochs E] [--runs R] [--quick]
#          [--bin PROGRAM] [--kernels "NAME..."]
#          [--check-train N] [--timing-data DIR] [--timing-train N]
#   --quick    1 run of 3 epochs for the timings
#   --kernels  some of the kernels PROGRAM --list-variants names (default: all of them)
#   --bin, --kernels, --check-train, --timing-*: for trying the script itself, e.g. on the
#              CPU emulation: --bin cuda/cuda-emu --kernels "naive tiled16" --check-train 256
#              --timing-data data/mnist --timing-train 256 --epochs 2 --runs 1
# Output: this table on stdout, the full log in results/logs/gpu-check.log, the CSV rows in
# results/gpu-check.csv. Exit status: 0 when every equivalence check passed (the timing
# targets are reported, not enforced), 1 when one failed, 2 on a usage or build error,
# 3 when no GPU is usable.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh    # load_variants

BIN=cuda/cuda KERNELS="" EPOCHS=6 RUNS=3
CHECK_TRAIN=2000 TIMING_DATA=data/fashion TIMING_TRAIN=0
TOL=1e-4
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) EPOCHS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --quick) EPOCHS=3; RUNS=1; shift ;;
    --bin) BIN=$2; shift 2 ;;
    --kernels) KERNELS=$2; shift 2 ;;
    --check-train) CHECK_TRAIN=$2; shift 2 ;;
    --timing-data) TIMING_DATA=$2; shift 2 ;;
    --timing-train) TIMING_TRAIN=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
done
for v in EPOCHS RUNS CHECK_TRAIN TIMING_TRAIN; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "gpu-check: --${v,,} must be a number, got '${!v}'" >&2; exit 2; }
done
[ "$EPOCHS" -ge 2 ] || { echo "gpu-check: --epochs must be >= 2 (epoch 1 is not timed)" >&2; exit 2; }
mkdir -p results/logs
LOG=results/logs/gpu-check.log
CSV=results/gpu-check.csv
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }
TMP=$(mktemp -d /tmp/partrain-gpu-check-XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# ---- 1. build
say "gpu-check: building $BIN and serial/serial"
if ! make --no-print-directory "$BIN" serial/serial >>"$LOG" 2>&1; then
  say "gpu-check: build failed (nvcc missing? see $LOG; make prints why)"
  tail -5 "$LOG"
  exit 2
fi
[ -d data/mnist ] && [ -d "$TIMING_DATA" ] || make --no-print-directory data >>"$LOG" 2>&1 ||
  { say "gpu-check: the data sets are missing and make data failed (see $LOG)"; exit 2; }

# ---- 2. a usable GPU?
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | sed 's/^/gpu-check: /' | tee -a "$LOG"
"$BIN" --data data/mnist --train 64 --test 16 --hidden 8 --epochs 1 --kernel naive --csv none >"$TMP/probe" 2>&1
rc=$?
if [ $rc -eq 3 ]; then say "gpu-check: no usable GPU: $(tail -1 "$TMP/probe")"; exit 3; fi
if [ $rc -ne 0 ]; then say "gpu-check: $BIN failed on a tiny run (exit $rc): $(tail -3 "$TMP/probe")"; exit 1; fi
say "gpu-check: device: $(head -1 "$TMP/probe" | sed 's/.*kernel naive, //')"

# the kernels and the flags that select each: $BIN --list-variants
load_variants "$BIN" || exit 2
[ -n "$KERNELS" ] || KERNELS=${VARIANTS[*]}
for k in $KERNELS; do
  [ -n "${VARIANT_FLAGS[$k]:-}" ] || { echo "gpu-check: unknown kernel '$k' (${VARIANTS[*]})" >&2; exit 2; }
done
# kernel_args NAME: the trainer's flags for a kernel name of the table
kernel_args() { echo "${VARIANT_FLAGS[$1]}"; }
# max_rel A B: largest relative difference of two ';'-separated curves ("bad" if lengths differ)
max_rel() {
  awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, ";"); m = split(b, y, ";");
    if (n != m || n == 0) { print "bad"; exit } d = 0;
    for (i = 1; i <= n; i++) { e = (x[i] - y[i]) / x[i]; if (e < 0) e = -e; if (!(e <= d)) d = e } printf "%.3g\n", d }'
}
within() { awk -v d="$1" -v t="$TOL" 'BEGIN { exit !(d != "bad" && d + 0 <= t + 0) }'; }

# ---- 3. equivalence with serial
CHECK=(--data data/mnist --train "$CHECK_TRAIN" --test 500 --epochs 3 --batch 64 --lr 0.05 --quiet)
serial/serial "${CHECK[@]}" --csv "$TMP/serial.csv" >>"$LOG" 2>&1 || { say "gpu-check: serial failed (see $LOG)"; exit 1; }
ref=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "train_loss_curve") c = i; next } { v = $c } END { print v }' "$TMP/serial.csv")
say ""
say "equivalence with serial (MNIST digits, $CHECK_TRAIN samples, 3 epochs, batch 64; tolerance $TOL relative per epoch)"
say "  serial             $ref"
failed=0
check_run() {   # check_run LABEL COMMAND...: run, compare with serial, print one line
  local label=$1; shift
  rm -f "$TMP/k.csv"
  "$@" "${CHECK[@]}" --csv "$TMP/k.csv" >>"$LOG" 2>&1
  local rc=$? curve="" d
  [ -f "$TMP/k.csv" ] && curve=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "train_loss_curve") c = i; next } { v = $c } END { print v }' "$TMP/k.csv")
  d=$(max_rel "$ref" "$curve")
  if [ $rc -eq 0 ] && within "$d"; then
    say "$(printf '  %-18s %s   max rel diff %s: PASS' "$label" "$curve" "$d")"
  else
    say "$(printf '  %-18s %s   max rel diff %s (exit %s): FAIL' "$label" "${curve:-nothing}" "$d" "$rc")"
    failed=1
  fi
}
for k in $KERNELS; do
  read -r -a args <<<"$(kernel_args "$k")"
  check_run "$k" "$BIN" "${args[@]}"
done
MPIBIN=cuda/cuda-mpi
if [ "$BIN" = cuda/cuda ] && make --no-print-directory cuda/cuda-mpi >>"$LOG" 2>&1 && [ -x cuda/cuda-mpi ]; then
  for k in $KERNELS; do
    read -r -a args <<<"$(kernel_args "$k")"
    check_run "$k, 2 ranks" scripts/mpirun.sh 2 "$MPIBIN" "${args[@]}"
  done
else
  say "  (cuda/cuda-mpi not built or not applicable: the 2-rank check is skipped)"
fi

# ---- 4. timing
TIMING=(--data "$TIMING_DATA" --epochs "$EPOCHS" --batch 64 --lr 0.01 --quiet --csv "$CSV")
[ "$TIMING_TRAIN" -gt 0 ] && TIMING+=(--train "$TIMING_TRAIN")
say ""
say "timing: $TIMING_DATA, batch 64, 784-256-128-10, $EPOCHS epochs (median of epochs 2..$EPOCHS), $RUNS run(s) per kernel, interleaved"
for r in $(seq 1 "$RUNS"); do
  for k in $KERNELS; do
    read -r -a args <<<"$(kernel_args "$k")"
    before=$( [ -f "$CSV" ] && wc -l <"$CSV" || echo 0)
    flock /tmp/partrain-bench.lock "$BIN" "${TIMING[@]}" "${args[@]}" >>"$LOG" 2>&1 ||
      { say "gpu-check: timing run $r of $k failed (see $LOG)"; exit 1; }
    # the row just appended, by column name: kernel, epoch seconds, GFLOP/s, samples/s, test accuracy
    awk -F, -v k="$k" -v before="$before" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
      NR > before { last = $0 } END { n = split(last, v, ",");
        if (n) print k, v[c["epoch_seconds_median"]], v[c["gflops"]], v[c["samples_per_second"]], v[c["test_accuracy"]] }' \
      "$CSV" >>"$TMP/times"
    say "  run $r $k: $(tail -1 "$TMP/times" | awk '{ printf "%.4f s per epoch", $2 }')"
  done
done
say ""
# per kernel: median over the runs of the epoch median; the others from the same run
what="per epoch of $TIMING_DATA$([ "$TIMING_TRAIN" -gt 0 ] && echo " (first $TIMING_TRAIN)")"
awk -v kernels="$KERNELS" -v what="$what" '
  { t[$1, ++n[$1]] = $2; g[$1, n[$1]] = $3; s[$1, n[$1]] = $4; a[$1, n[$1]] = $5 }
  END {
    nk = split(kernels, K, " ")
    for (i = 1; i <= nk; i++) {
      k = K[i]; m = n[k]
      for (x = 1; x <= m; x++) idx[x] = x
      for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (t[k, idx[y]] < t[k, idx[x]]) { z = idx[x]; idx[x] = idx[y]; idx[y] = z }
      mid = idx[int((m + 1) / 2)]
      T[k] = t[k, mid]; G[k] = g[k, mid]; S[k] = s[k, mid]; A[k] = a[k, mid]
    }
    printf "%-9s %12s %12s %10s %12s %10s\n", "kernel", "epoch s", "samples/s", "GFLOP/s", "x cublas", "test acc"
    for (i = 1; i <= nk; i++) {
      k = K[i]
      rel = ("cublas" in T) ? sprintf("%.2f", T[k] / T["cublas"]) : "-"
      printf "%-9s %12.4f %12.0f %10.1f %12s %9.2f%%\n", k, T[k], S[k], G[k], rel, A[k]
    }
    best = ""
    for (i = 1; i <= nk; i++) if (K[i] ~ /^tiled/ && (best == "" || T[K[i]] < T[best])) best = K[i]
    if (best != "") {
      printf "\ntarget: tiled <= 0.15 s %s (best %s: %.4f s): %s\n", what, best, T[best], T[best] <= 0.15 ? "met" : "MISSED"
      if ("cublas" in T)
        printf "target: tiled within 3x of cublas (%.2fx): %s\n", T[best] / T["cublas"], T[best] <= 3 * T["cublas"] ? "met" : "MISSED"
    }
  }' "$TMP/times" | tee -a "$LOG"
say ""
say "gpu-check: equivalence $([ $failed = 0 ] && echo PASSED || echo FAILED); full log $LOG, CSV rows $CSV"
exit $failed
