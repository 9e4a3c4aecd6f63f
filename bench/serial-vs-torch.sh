#!/usr/bin/env bash
# bench/serial-vs-torch.sh — the serial trainer against the same MLP in PyTorch, one core each.
#
# Runs serial/serial (own GEMM, and --gemm blas when the build has it) and
# bench/torch_mlp.py side by side on Fashion-MNIST (all 60k, batch 64), each pinned
# with `taskset -c CPU`, single-threaded (OMP/OPENBLAS/MKL_NUM_THREADS=1) and with
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed from the environment so OpenBLAS
# picks its own kernels. The set is repeated R times, interleaved (serial, blas,
# torch, serial, blas, torch, ...), so slow drifts of the machine hit every
# program alike. Every run appends a row to the CSV; then a table is printed:
# per program/variant the median over the R runs of each run's
# epoch_seconds_median (itself the median of epochs 2..E), GFLOP/s, samples/s and
# the ratio to torch (target serial/torch <= 0.7, stretch <= 0.6).
#
# Usage: bench/serial-vs-torch.sh [--epochs E] [--runs R] [--batch B] [--csv FILE]
#                                 [--data DIR] [--train N] [--cpu N] [--quick]
#   --epochs E   epochs per run (default 6: the median is over epochs 2..6)
#   --runs R     repetitions of the set (default 3)
#   --batch B    mini-batch size (default 64)
#   --csv FILE   where the rows go (default results/bench-serial.csv)
#   --data DIR   data set (default data/fashion)
#   --train N    use the first N training samples (default all)
#   --cpu N      the core to pin to (default 0)
#   --quick      smoke test: --train 10000, 3 epochs, 1 run
# Exit status: 0; 1 when a run fails; 2 on a usage error or a missing prerequisite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY=/usr/bin/python3          # Debian's interpreter: the one that sees python3-torch
epochs=6 runs=3 batch=64 csv=results/bench-serial.csv data=data/fashion cpu=0 train=0

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "serial-vs-torch: $*" >&2; exit 2; }
need_value() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) need_value "$@"; epochs=$2; shift 2 ;;
    --runs)   need_value "$@"; runs=$2; shift 2 ;;
    --batch)  need_value "$@"; batch=$2; shift 2 ;;
    --csv)    need_value "$@"; csv=$2; shift 2 ;;
    --data)   need_value "$@"; data=$2; shift 2 ;;
    --train)  need_value "$@"; train=$2; shift 2 ;;
    --cpu)    need_value "$@"; cpu=$2; shift 2 ;;
    --quick)  train=10000 epochs=3 runs=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
for v in epochs runs batch cpu train; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "--$v: not a non-negative integer: '${!v}'"
done
[ "$epochs" -ge 1 ] && [ "$runs" -ge 1 ] && [ "$batch" -ge 1 ] || die "--epochs, --runs and --batch must be >= 1"
[ "$csv" != none ] || die "--csv none: the table is built from the CSV; give a file"

# prerequisites
command -v taskset >/dev/null || die "taskset missing (apt-get install util-linux)"
[ -x serial/serial ] || die "serial/serial is not built (run: make serial)"
[ -d "$data" ] || die "$data missing (run: scripts/get-data.sh)"
torch_version=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
  die "$PY cannot import torch (apt-get install python3-torch)"
variants=(own)
if serial/serial --help | grep -q -- '--gemm' && ! serial/serial --help | grep -q 'not built in'; then
  variants+=(blas)
else
  echo "serial-vs-torch: serial/serial has no --gemm blas in this build; timing the own GEMM only"
fi

# one core, one thread, OpenBLAS choosing its kernels itself
pinned=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
        OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 taskset -c "$cpu")
common=(--data "$data" --batch "$batch" --epochs "$epochs" --csv "$csv" --quiet)
[ "$train" -eq 0 ] || common+=(--train "$train")

since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
echo "serial-vs-torch: $data, batch $batch, $epochs epochs x $runs runs, core $cpu, torch $torch_version;" \
     "serial GEMMs: ${variants[*]}; rows -> $csv"
total=$(( runs * (${#variants[@]} + 1) ))
k=0
run_one() {   # label, command...: one pinned run; shows the trainer's summary line
  local label=$1; shift
  k=$((k + 1))
  local out
  if ! out=$("${pinned[@]}" "$@" 2>&1); then
    printf '%s\n' "$out" >&2
    echo "serial-vs-torch: run $k/$total ($label) failed" >&2
    exit 1
  fi
  printf '[%d/%d] %-14s %s\n' "$k" "$total" "$label" "$(printf '%s\n' "$out" | tail -n 1)"
}
for _ in $(seq 1 "$runs"); do
  for g in "${variants[@]}"; do
    run_one "serial $g" serial/serial --gemm "$g" "${common[@]}"
  done
  run_one "pytorch" "$PY" bench/torch_mlp.py --threads 1 "${common[@]}"
done

echo
echo "median over $runs run(s) of each run's median epoch time (epochs 2..$epochs); ratio = time / torch's"
where=(--where "epochs=$epochs" --where "batch=$batch")
[ "$train" -eq 0 ] || where+=(--where "train_n=$train")
"$PY" scripts/summarize.py bench "$csv" --since "$since" "${where[@]}"
