#!/usr/bin/env bash
# bench/serial-vs-torch.sh — the serial trainer against the same MLP in PyTorch, one core each.
#
# Runs serial/serial (every --gemm variant serial/serial --list-variants names: its own
# GEMM, and OpenBLAS when the build has it) and bench/torch_mlp.py side by side on Fashion-MNIST (all 60k, batch 64), each pinned
# with `taskset -c CPU`, single-threaded (OMP/OPENBLAS/MKL_NUM_THREADS=1) and with
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed from the environment so OpenBLAS
# picks its own kernels. The set is repeated R times, interleaved (serial, blas,
# torch, serial, blas, torch, ...), so slow drifts of the machine hit every
# program alike; every run holds /tmp/partrain-bench.lock (flock), so no other benchmark
# overlaps it. Every run appends a row to the CSV: the trainers' schema plus
# other_load_cores (the other processes' load during the run, in cores) and disturbed (1
# when it exceeded --max-other; bench_run in scripts/lib.sh, which says once when the machine
# is busy; a CSV written before these columns gets them, empty on its old rows); then a
# table is printed (scripts/summarize.py bench): per program/variant the median over the R
# runs of each run's epoch_seconds_median (itself the median of epochs 2..E), GFLOP/s,
# samples/s and the ratio to torch (target serial/torch <= 0.7, stretch <= 0.6); a "*"
# after a runs count: the median includes disturbed rows.
#
# Usage: bench/serial-vs-torch.sh [--epochs E] [--runs R] [--batch B] [--csv FILE]
#                                 [--data DIR] [--train N] [--cpu N] [--quick]
#                                 [--tries N] [--max-other C] [--idle-wait S]
#   --epochs E   epochs per run (default 6: the median is over epochs 2..6)
#   --runs R     repetitions of the set (default 3)
#   --batch B    mini-batch size (default 64)
#   --csv FILE   where the rows go (default results/bench-serial.csv)
#   --data DIR   data set (default data/fashion)
#   --train N    use the first N training samples (default all)
#   --cpu N      the core to pin to (default 0)
#   --quick      smoke test: --train 10000, 3 epochs, 1 run
#   --tries N, --max-other C, --idle-wait S   as in bench/mpi-bench.sh: attempts per run while
#                other load disturbs it (default 1), the other load in cores above which a
#                run is disturbed (default 0.05), the idle wait before a run when N > 1 (30 s)
# Exit status: 0 (also on a busy machine); 1 when a run fails; 2 on a usage error or a
# missing prerequisite; each with its reason on stderr.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

epochs=6 runs=3 batch=64 csv=results/bench-serial.csv data=data/fashion cpu=0 train=0
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
    --tries|--max-other|--idle-wait) need_value "$@"; bench_load_option "$1" "$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
for v in epochs runs batch cpu train; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "--$v: not a non-negative integer: '${!v}'"
done
[ "$epochs" -ge 1 ] && [ "$runs" -ge 1 ] && [ "$batch" -ge 1 ] || die "--epochs, --runs and --batch must be >= 1"
[ "$csv" != none ] || die "--csv none: the table is built from the CSV; give a file"

# prerequisites
need_tools taskset flock
[ -x serial/serial ] || die "serial/serial is not built (run: make serial)"
[ -d "$data" ] || die "$data missing (run: scripts/get-data.sh)"
torch_version=$("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
  die "$PY cannot import torch (apt-get install python3-torch)"
load_variants serial/serial || exit 2
[ ${#VARIANTS[@]} -gt 1 ] ||
  echo "serial-vs-torch: serial/serial lists one GEMM in this build (no OpenBLAS); timing ${VARIANTS[*]} only"
bench_check_csv "$csv"

# one core, one thread, OpenBLAS choosing its kernels itself
pinned=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
        OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 taskset -c "$cpu")
common=(--data "$data" --batch "$batch" --epochs "$epochs" --quiet)
[ "$train" -eq 0 ] || common+=(--train "$train")

since=$(utc_now)
bench_cpu_line
echo "serial-vs-torch: $data, batch $batch, $epochs epochs x $runs runs, core $cpu, torch $torch_version;" \
     "serial GEMMs: ${VARIANTS[*]}; rows -> $csv"
BENCH_TOTAL=$(( runs * (${#VARIANTS[@]} + 1) )) BENCH_WIDTH=14 BENCH_CUT=1000 BENCH_CSV=$csv
for _ in $(seq 1 "$runs"); do
  for g in "${VARIANTS[@]}"; do
    # shellcheck disable=SC2086  # the variant's flags, e.g. "--gemm blas"
    bench_run "serial $g" "${pinned[@]}" serial/serial ${VARIANT_FLAGS[$g]} "${common[@]}"
  done
  bench_run "pytorch" "${pinned[@]}" "$PY" bench/torch_mlp.py --threads 1 "${common[@]}"
done

echo
echo "median over $runs run(s) of each run's median epoch time (epochs 2..$epochs); ratio = time / torch's"
where=(--where "epochs=$epochs" --where "batch=$batch")
[ "$train" -eq 0 ] || where+=(--where "train_n=$train")
"$PY" scripts/summarize.py bench "$csv" --since "$since" "${where[@]}"
