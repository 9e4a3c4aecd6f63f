#!/usr/bin/env bash
# bench/serial-peak.sh — how close serial/serial's training comes to one core's FMA peak,
# both measured in the same round on the same core, so that the machine's slow and fast
# stretches fall on both alike (issue 32: >= 85 % at batch 64 and at image size 112).
#
# Usage: bench/serial-peak.sh [--rounds R] [--epochs E] [--train-112 N] [--data DIR] [--csv FILE]
#                             [--max-other C]
#   --rounds R     rounds [3]; the verdict is the median over them of each round's fraction
#   --epochs E     epochs per serial run; its epoch_seconds_median (epochs 2..E) is used [3]
#   --train-112 N  training samples of the image-size-112 run (12,544 inputs a sample) [4000]
#   --data DIR     IDX data [data/fashion]
#   --csv FILE     every run's row [results/serial-peak.csv]
#   --max-other C  other load in cores above which a run is marked disturbed [0.05]
# One round, all on core 0 (taskset -c 0): bench/fma-peak.c for 1 s (its best quarter
# second: twelve chains of the widest FMAs), bench/gemm-step (the step's eight products
# alone, each its best of 3 rounds with warm caches: what the kernel itself reaches, the
# trainer's own ceiling) at 784 inputs, serial --batch 64 on the full training set, then
# gemm-step at 12,544 inputs and serial --batch 64 --image-size 112 on --train-112
# samples. A serial run's gflops column is the MLP's multiply-add FLOPs per sample
# (forward, backward, update) times the samples, over its median epoch: everything an
# epoch does (the batch's gather, the softmax, the update) is in its time. Needs AVX-512
# or AVX2 + FMA (bench/fma-peak.c measures the widest FMA the build targets, the width
# common/gemm.h's kernel uses); without: exit 1, the reason.
# Output: the CPU model and family, one line per run, then a table "round | FMA peak |
# b64 GFLOP/s | fraction | products alone | 112 GFLOP/s | fraction | products alone" and
# the median fractions; every run in --csv FILE: round,what,gflops,other_load_cores,disturbed
# (what: peak, kernel-b64, b64, kernel-112, img112)
# Exit status: 0 (a benchmark reports, it does not judge), 2 on a usage error, 1 when a
# build or run fails; each with its reason on stderr.
export LC_ALL=C   # numbers in awk and printf: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh   # die, need_value, bench_run; the ERR trap: a failing command names itself

rounds=3 epochs=3 train112=4000 data=data/fashion csv=results/serial-peak.csv
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) need_value "$@"; rounds=$2; shift 2 ;;
    --epochs) need_value "$@"; epochs=$2; shift 2 ;;
    --train-112) need_value "$@"; train112=$2; shift 2 ;;
    --data) need_value "$@"; data=$2; shift 2 ;;
    --csv) need_value "$@"; csv=$2; shift 2 ;;
    --max-other) need_value "$@"; bench_load_option "$1" "$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ && $epochs =~ ^[2-9]$|^[1-9][0-9]+$ && $train112 =~ ^[1-9][0-9]*$ ]] ||
  die "--rounds and --train-112 must be positive integers, --epochs at least 2"
[ -d "$data" ] || die "--data $data: no such directory (make data)"
[ ! -L "$csv" ] || die "--csv $csv: a symbolic link; give the file itself"
[ ! -e "$csv" ] || head -n 1 "$csv" | grep -q '^round,what,gflops,' || die "--csv $csv: an existing file that is not this benchmark's"
[ -d "$(dirname "$csv")" ] || mkdir -p "$(dirname "$csv")" || die "--csv $csv: cannot create its directory"
need_tools flock taskset
grep -qw avx512f /proc/cpuinfo || { grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; } ||
  { echo "serial-peak: this CPU has neither AVX-512 nor AVX2 + FMA, one of which bench/fma-peak.c needs" >&2; exit 1; }
make -s serial/serial bench/gemm-step >/dev/null || { echo "serial-peak: the build failed" >&2; exit 1; }
bench_tmp
${CC:-cc} -std=c11 -O2 -march=native bench/fma-peak.c -o "$BENCH_TMP/fma-peak" ||
  { echo "serial-peak: bench/fma-peak.c does not build" >&2; exit 1; }

echo "serial-peak: CPU $(cpu_kind); core 0"
echo "round,what,gflops,$BENCH_COLS" >"$csv"
BENCH_CSV=$BENCH_TMP/run.csv BENCH_TOTAL=$((5 * rounds)) BENCH_WIDTH=22 BENCH_CUT=90
run() {   # ROUND WHAT: one run (bench_run), its row appended to $csv; GFLOPS: its rate
  local cmd=()
  case $2 in
    peak) cmd=(taskset -c 0 "$BENCH_TMP/fma-peak" 1) ;;
    kernel-b64) cmd=(taskset -c 0 bench/gemm-step --batch 64 --rounds 3) ;;
    kernel-112) cmd=(taskset -c 0 bench/gemm-step --batch 64 --inputs 12544 --rounds 3) ;;
    b64) cmd=(taskset -c 0 serial/serial --data "$data" --batch 64 --epochs "$epochs" --quiet) ;;
    img112) cmd=(taskset -c 0 serial/serial --data "$data" --batch 64 --image-size 112 --train "$train112"
                 --test 500 --epochs "$epochs" --quiet) ;;
  esac
  rm -f "$BENCH_CSV"
  if [ "$2" = peak ]; then
    local BENCH_CSV=""   # not a trainer: no --csv; its rate from its output (BENCH_OUT)
    bench_run "round $1 fma-peak" "${cmd[@]}" </dev/null
    GFLOPS=$(sed -n 's/^fma-peak: best \([0-9.]*\) GFLOP.*/\1/p' <<<"$BENCH_OUT")
  elif [ "${2%-*}" = kernel ]; then
    local BENCH_CSV=""
    bench_run "round $1 gemm-step ${2#*-}" "${cmd[@]}" </dev/null
    GFLOPS=$(sed -n 's/^gemm-step: step [0-9.]* us, \([0-9.]*\) GFLOP.*/\1/p' <<<"$BENCH_OUT")
  else
    bench_run "round $1 serial $2" "${cmd[@]}" </dev/null
    GFLOPS=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "gflops") c = i; next } { print $c }' "$BENCH_CSV")
  fi
  [ -n "$GFLOPS" ] || { echo "serial-peak: round $1 $2 gave no rate" >&2; exit 1; }
  echo "$1,$2,$GFLOPS,$BENCH_OTHER,$BENCH_DISTURBED" >>"$csv"
}
for r in $(seq 1 "$rounds"); do
  run "$r" peak; run "$r" kernel-b64; run "$r" b64; run "$r" kernel-112; run "$r" img112
done
echo
echo "| round | FMA peak (GFLOP/s) | batch 64 (GFLOP/s) | of the peak | its products alone | image 112 (GFLOP/s) | of the peak | its products alone |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
awk -F, 'NR > 1 { g[$1 "," $2] = $3; if ($1 > n) n = $1; dist += ($5 == 1) }
  function median(a, k,   i, j, x) { for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
  END { for (r = 1; r <= n; r++) { p = g[r ",peak"]; A[r] = g[r ",b64"] / p; B[r] = g[r ",img112"] / p
          KA[r] = g[r ",kernel-b64"] / p; KB[r] = g[r ",kernel-112"] / p
          printf "| %d | %.0f | %.1f | %.1f %% | %.1f (%.1f %%) | %.1f | %.1f %% | %.1f (%.1f %%) |\n", r, p, g[r ",b64"], 100 * A[r],
                 g[r ",kernel-b64"], 100 * KA[r], g[r ",img112"], 100 * B[r], g[r ",kernel-112"], 100 * KB[r] }
        printf "\nserial-peak: median over %d rounds: batch 64 %.1f %% of the peak, image 112 %.1f %% (target 85 %%); %d disturbed runs\n",
               n, 100 * median(A, n), 100 * median(B, n), dist
        printf "serial-peak: the products alone (bench/gemm-step): batch 64 %.1f %% of the peak, image 112 %.1f %%\n",
               100 * median(KA, n), 100 * median(KB, n) }' "$csv"
echo "(every run: $csv)"
