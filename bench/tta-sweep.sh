#!/usr/bin/env bash
# bench/tta-sweep.sh — time to accuracy (MLPerf's measure) against the global batch:
# serial and the best data-parallel strategy at C cores, each to a stated test accuracy,
# so the report can say at which batch bigger (faster) epochs stop buying time.
#
# Every run: --target-accuracy A (stop after the first epoch with test accuracy >= A;
# epochs_to_target, seconds_to_target empty when the --epochs cap comes first), the
# learning rate scaled linearly with the batch from --lr at --lr-base-batch, with a
# linear warm-up of --warmup-epochs (Goyal et al. 2017; common/schedule.h). Why these
# values: docs/tta.md. The strategy: scripts/tta_sweep.py best reads this run's
# bench-openmp.csv, bench-mpi.csv, bench-hybrid.csv in --results (speedup over serial
# at C workers) and takes the fastest; without them mpi allreduce at P = C. Which one and
# why goes to --best FILE (one line: label, why, the --epochs cap; tab-separated) and
# the output. Data-parallel strategies do
# serial's maths at the same global batch, so their epochs to target should be serial's.
# Batches the trainers' memory check refuses (exit 2) are dropped before the timed runs:
# one-epoch probes of both programs from the largest batch down to the first that fits.
# Order: for each seed, for each batch, serial then the strategy (a drift of the machine
# hits both alike); each run holds the benchmark lock (bench_run in scripts/lib.sh) and
# appends its row (the trainers' schema, plus other_load_cores, disturbed) to --csv.
#
# Usage: bench/tta-sweep.sh [--batches L] [--seeds L] [--target A] [--epochs E] [--lr LR]
#                           [--base-batch B0] [--warmup W] [--data DIR] [--train N]
#                           [--test N] [--results DIR] [--csv FILE] [--best FILE] [--diverged FILE]
#                           [--cores N] [--quick] [--smoke]
#   --batches L     global batches (default "32 64 128 256 512 1024 2048 4096")
#   --seeds L       seeds (default "1 2 3")
#   --target A      test accuracy to reach, in % (default 84)
#   --epochs E      the cap (default 8)
#   --lr LR         the rate at the base batch (default 0.03)
#   --base-batch B0 (default 64)
#   --warmup W      warm-up epochs (default 1)
#   --data DIR      (default data/fashion); --train N, --test N: the first N samples
#   --results DIR   where the bench CSVs that choose the strategy are (default results)
#   --csv FILE      the rows (default DIR/tta.csv); --best FILE: the choice (DIR/tta-best.txt);
#                   --diverged FILE: the runs whose loss diverged (DIR/tta-diverged.txt)
#   --cores N       C = N workers for the strategy (default: the cores, scripts/lib.sh)
#   --quick         batches 32 256 4096, seed 1, 10,000 training samples, target 80, cap 6
#   --smoke         batches 32 512, seed 1, 1,000 MNIST digits (500 test), target 60, cap 3
# Exit status: 0; 1 when a run fails; 2 on a usage error or a missing prerequisite.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

batches="32 64 128 256 512 1024 2048 4096" seeds="1 2 3" target=84 epochs=8 lr=0.03 base=64 warmup=1
data=data/fashion train=0 test=0 results=results csv="" best="" diverged=""
while [ $# -gt 0 ]; do
  case "$1" in
    --batches)    need_value "$@"; batches=$2; shift 2 ;;
    --seeds)      need_value "$@"; seeds=$2; shift 2 ;;
    --target)     need_value "$@"; target=$2; shift 2 ;;
    --epochs)     need_value "$@"; epochs=$2; shift 2 ;;
    --lr)         need_value "$@"; lr=$2; shift 2 ;;
    --base-batch) need_value "$@"; base=$2; shift 2 ;;
    --warmup)     need_value "$@"; warmup=$2; shift 2 ;;
    --data)       need_value "$@"; data=$2; shift 2 ;;
    --train)      need_value "$@"; train=$2; shift 2 ;;
    --test)       need_value "$@"; test=$2; shift 2 ;;
    --results)    need_value "$@"; results=$2; shift 2 ;;
    --csv)        need_value "$@"; csv=$2; shift 2 ;;
    --best)       need_value "$@"; best=$2; shift 2 ;;
    --diverged)   need_value "$@"; diverged=$2; shift 2 ;;
    --cores)      need_value "$@"; sweep_option "$1" "$2"; shift 2 ;;
    --quick)      batches="32 256 4096" seeds=1 train=10000 target=80 epochs=6; shift ;;
    --smoke)      batches="32 512" seeds=1 data=data/mnist train=1000 test=500 target=60 epochs=3; shift ;;
    -h|--help)    bench_usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
for b in $batches; do [[ $b =~ ^[1-9][0-9]*$ ]] || die "--batches: not a positive integer: '$b'"; done
for s in $seeds; do [[ $s =~ ^[0-9]+$ ]] || die "--seeds: not a non-negative integer: '$s'"; done
[ -n "$batches" ] && [ -n "$seeds" ] || die "--batches and --seeds need at least one value"
for v in epochs base; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v/base/base-batch}: not a positive integer: '${!v}'"; done
for v in train test warmup; do [[ ${!v} =~ ^[0-9]+$ ]] || die "--$v: not a non-negative integer: '${!v}'"; done
[[ $lr =~ ^[0-9]*\.?[0-9]+$ ]] || die "--lr: not a positive number: '$lr'"
awk -v t="$target" 'BEGIN { exit !(t ~ /^[0-9]*\.?[0-9]+$/ && t > 0 && t <= 100) }' || die "--target: not a percentage in (0, 100]: '$target'"
[ -d "$data" ] || die "$data missing (run: scripts/get-data.sh)"
[ -n "$csv" ] || csv=$results/tta.csv
[ -n "$best" ] || best=$results/tta-best.txt
[ -n "$diverged" ] || diverged=$results/tta-diverged.txt
[ "$csv" != none ] || die "--csv none: the report is built from the rows; give a file"
batches=$(tr ' ' '\n' <<<"$batches" | sort -n -u | paste -sd' ')
sweep_setup full
C=$SWEEP_CORES cores=$(nproc)
need_tools flock taskset
need_built serial/serial
bench_check_csv "$csv"

# ---- the strategy: the fastest at C workers in this run's bench CSVs, else mpi allreduce
IFS=$'\t' read -r prog variant ranks threads why < <("$PY" scripts/tta_sweep.py best --results "$results" --cores "$C")
[ -n "${why:-}" ] || die "scripts/tta_sweep.py best gave no choice"
wait_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u OMP_WAIT_POLICY)
[ $((ranks * threads)) -le "$cores" ] || wait_env+=(OMP_WAIT_POLICY=passive)   # above the real cores: threads sleep
vflags=()
flags_of() { local f; f=$(variant_flags "$1" "$variant") || exit 2; read -r -a vflags <<<"$f"; }   # its line is on stderr
case $prog in
  openmp) need_built openmp/openmp
          flags_of openmp/openmp
          strategy=("${wait_env[@]}" OMP_NUM_THREADS="$threads" taskset -c "0-$(( (threads <= cores ? threads : cores) - 1 ))"
                    openmp/openmp "${vflags[@]}" --threads "$threads") ;;
  mpi)    need_tools mpirun
          if [ "$variant" = shm ]; then need_built mpi/shm; strategy=(scripts/mpirun.sh "$ranks" mpi/shm --sync shm)
          else
            need_built mpi/mpi
            flags_of mpi/mpi
            strategy=(scripts/mpirun.sh "$ranks" mpi/mpi "${vflags[@]}")
          fi ;;
  hybrid) need_tools mpirun; need_built hybrid/hybrid
          flags_of hybrid/hybrid
          strategy=("${wait_env[@]}" scripts/mpirun.sh --bind-to-none "$ranks" hybrid/hybrid "${vflags[@]}" --threads "$threads") ;;
  *) die "scripts/tta_sweep.py best chose '$prog', which this script cannot launch" ;;
esac
label=$("$PY" -c 'import sys; sys.path.insert(0, "scripts"); import tta_sweep as t; print(t.label(*sys.argv[1:]))' \
        "$prog" "$variant" "$ranks" "$threads")
serial=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c 0 serial/serial)
common=(--data "$data" --epochs "$epochs" --lr "$lr" --lr-scaling linear --lr-base-batch "$base" --quiet
        --target-accuracy "$target")
[ "$warmup" -eq 0 ] || common+=(--warmup-epochs "$warmup")
[ "$train" -eq 0 ] || common+=(--train "$train")
[ "$test" -eq 0 ] || common+=(--test "$test")

# ---- the memory's limit: the largest batch both memory checks accept (exit 2 with "not
# enough memory": refused; memory only grows with the batch, so the smaller ones fit)
bench_tmp
kept=""
for b in $(tr ' ' '\n' <<<"$batches" | sort -rn); do
  refused=""
  for who in strategy serial; do
    if [ $who = strategy ]; then cmd=("${strategy[@]}"); else cmd=("${serial[@]}"); fi
    rc=0; "${cmd[@]}" "${common[@]}" --batch "$b" --epochs 1 --test 100 --csv none >"$BENCH_TMP/probe.out" 2>&1 || rc=$?
    [ $rc = 0 ] && continue
    ! grep -q 'training diverged' "$BENCH_TMP/probe.out" || continue   # it fits; the sweep records the divergence
    refused=$(grep -m 1 'not enough memory' "$BENCH_TMP/probe.out") && [ $rc = 2 ] ||
      { cat "$BENCH_TMP/probe.out" >&2; die "the one-epoch probe of $([ $who = serial ] && echo serial || echo "$label") at batch $b failed (exit $rc)"; }
    break
  done
  if [ -z "$refused" ]; then kept=$(tr ' ' '\n' <<<"$batches" | awk -v m="$b" '$1 <= m' | paste -sd' '); break; fi
  echo "tta-sweep: batch $b dropped: $refused"
done
[ -n "$kept" ] || die "no batch of '$batches' fits the memory (the trainers' memory checks refused them all)"
batches=$kept

printf '%s\t%s\t%s\n' "$label" "$why" "$epochs" >"$best.tmp" && mv -f "$best.tmp" "$best"
nb=$(wc -w <<<"$batches") ns=$(wc -w <<<"$seeds")
BENCH_TOTAL=$((2 * nb * ns)) BENCH_CSV=$csv
# the estimate: every run to the cap at about 1.5 s an epoch of 60k samples on one core
# (the strategy's epochs are faster, unreached runs longer: it errs long)
samples=$([ "$train" -eq 0 ] && echo 60000 || echo "$train")
est=$(awk -v r="$BENCH_TOTAL" -v e="$epochs" -v s="$samples" 'BEGIN { printf "%d", r * (2 + 0.75 * e * 1.5 * s / 60000) }')
echo "tta-sweep: $data$([ "$train" -eq 0 ] || echo " (first $train)"), target $target %, cap $epochs epochs," \
     "lr $lr x batch / $base, warm-up $warmup epoch(s); batches $batches; seeds $seeds; rows -> $csv"
echo "tta-sweep: strategy $label: $why"
echo "tta-sweep: $BENCH_TOTAL runs, about $((est / 60)) min $((est % 60)) s estimated"
# a run whose loss diverges (the scaled rate too large for its batch) writes no row: the
# trainers exit 1 with "training diverged at epoch E". It did not reach the target: its
# line goes to --diverged FILE (side, label, batch, seed, rate, cap, epoch), which the
# figure and the report count as not reached; any other failure ends the sweep.
[ -s "$diverged" ] || printf 'side\tlabel\tbatch\tseed\tlr\tcap\tepoch\n' >"$diverged"
tta_run() {   # SIDE LABEL BATCH SEED CMD...: bench_run in a subshell, so a divergence is not fatal
  local side=$1 name=$2 b=$3 s=$4 rc=0 e; shift 4
  ( bench_run "$name b$b s$s" "$@" "${common[@]}" --batch "$b" --seed "$s" ) >"$BENCH_TMP/run.out" 2>"$BENCH_TMP/run.err" || rc=$?
  BENCH_K=$((BENCH_K + 1))
  cat "$BENCH_TMP/run.out"   # the subshell saw BENCH_BUSY: the busy line comes once
  ! grep -q '^bench: the machine is busy' "$BENCH_TMP/run.out" || BENCH_BUSY=1
  [ $rc = 0 ] && return 0
  e=$(sed -n 's/.*training diverged at epoch \([0-9]*\).*/\1/p' "$BENCH_TMP/run.err" | head -n 1)
  if [ $rc = 1 ] && [ -n "$e" ]; then
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$side" "$name" "$b" "$s" \
      "$(awk -v l="$lr" -v b="$b" -v b0="$base" 'BEGIN { printf "%g", l * b / b0 }')" "$epochs" "$e" >>"$diverged"
    echo "[$BENCH_K/$BENCH_TOTAL] $name b$b s$s  diverged at epoch $e: not reached (no row; -> $diverged)"
    return 0
  fi
  cat "$BENCH_TMP/run.err" >&2
  exit 1
}
for s in $seeds; do
  for b in $batches; do
    tta_run serial serial "$b" "$s" "${serial[@]}"
    tta_run best "$label" "$b" "$s" "${strategy[@]}"
  done
done
echo
"$PY" scripts/tta_sweep.py table "$csv" "$diverged"
