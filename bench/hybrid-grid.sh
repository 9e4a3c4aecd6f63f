#!/usr/bin/env bash
# bench/hybrid-grid.sh — hybrid/hybrid over a P x T grid fitted to the machine's C cores
# at a fixed 60k samples (strong scaling), against serial/serial on one core. The grid
# (scripts/lib.sh, docs/sweeps.md): at most 12 points with P*T <= 2C, P and T powers of two
# (or C): 1x1, 1xC, Cx1, the P*T = C points, the squarest P*T = 2C ones (on 2 cores:
# 1x1 1x2 1x4 2x1 2x2 4x1); --grid L replaces it, --cores N sets C.
#
# Every configuration trains the same global batch (default 512) for E epochs (default 3;
# epoch = median of epochs 2..E) with --sync allreduce, launched by
# scripts/mpirun.sh --bind-to-none (P > cores: --oversubscribe and mpi_yield_when_idle);
# OMP_WAIT_POLICY=passive when P*T exceeds the cores, else unset (the CSV column
# omp_wait_policy records it). Every run holds /tmp/partrain-bench.lock (flock) and its
# other load is measured (bench_run in scripts/lib.sh): each row gets, after the trainers'
# schema, other_load_cores (the other processes' load during the run, in cores) and
# disturbed (1 when it exceeded --max-other; the machine being busy is said once).
# Writes: CSV rows (--csv, default results/hybrid-grid.csv; all of them at once, at the
# end; a CSV written before the two columns gets them, empty on its old rows), the points
# results/hybrid-grid.dat, seed report 001's Table 4 ("expected speedup", its ranges from
# scripts/seeds.py) with our measured column beside it, a disturbed cell marked (--table, default
# results/hybrid-table4.md; both by scripts/bench_tables.py hybrid-grid), and the heat
# maps PLOTDIR/hybrid-grid.png (--plots, default plots; none: no figure), drawn from
# the CSV by scripts/plot.sh (plots/hybrid.gp) as `make plots` does; skipped with a note
# when gnuplot is missing or the CSV is not named hybrid-grid.csv. Every configuration with
# more ranks x threads than the cores is oversubscribed, so C x is the ceiling, whatever
# the report's ranges (written for 4 and 8 cores) say.
#
# Usage: bench/hybrid-grid.sh [--batch B] [--epochs E] [--train N] [--data DIR]
#                             [--csv FILE] [--dat FILE] [--plots DIR|none] [--table MD]
#                             [--tries N] [--max-other C] [--idle-wait S] [--grid L] [--cores N]
#   --grid L       the P x T points, e.g. 1x8,2x4,8x1 (default: the grid of C cores)
#   --cores N      C = N for the default grid and the words (passive, oversubscription:
#                  the real nproc)
#   --tries N, --max-other C, --idle-wait S   as in bench/mpi-bench.sh: attempts per run while
#                  other load disturbs it (default 1), the other load in cores above which a
#                  run is disturbed (default 0.05), the idle wait before a run when N > 1 (30 s)
# Exit status: 0 (also on a busy machine); 1 when a run fails; 2 on a usage error or a
# missing prerequisite; each with its reason on stderr.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

batch=512 epochs=3 train=0 data=data/fashion
csv=results/hybrid-grid.csv dat=results/hybrid-grid.dat plotdir=plots table=results/hybrid-table4.md
while [ $# -gt 0 ]; do
  case "$1" in
    --batch)  need_value "$@"; batch=$2; shift 2 ;;
    --epochs) need_value "$@"; epochs=$2; shift 2 ;;
    --train)  need_value "$@"; train=$2; shift 2 ;;
    --data)   need_value "$@"; data=$2; shift 2 ;;
    --csv)    need_value "$@"; csv=$2; shift 2 ;;
    --dat)    need_value "$@"; dat=$2; shift 2 ;;
    --plots)  need_value "$@"; plotdir=$2; shift 2 ;;
    --table)  need_value "$@"; table=$2; shift 2 ;;
    --tries|--max-other|--idle-wait) need_value "$@"; bench_load_option "$1" "$2"; shift 2 ;;
    --grid|--cores) need_value "$@"; sweep_option "$1" "$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
for v in batch epochs; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--$v: not a positive integer: '${!v}'"; done
[[ $train =~ ^[0-9]+$ ]] || die "--train: not a non-negative integer: '$train'"
[ "$csv" != none ] || die "--csv none: the table is built from the rows; give a file"
sweep_setup full
read -r -a GRID <<<"$SWEEP_GRID"
need_built serial/serial hybrid/hybrid
need_tools mpirun flock taskset
[ -d "$data" ] || die "$data missing (run: scripts/get-data.sh)"
bench_check_csv "$csv"
cores=$(nproc)
mkdir -p "$(dirname "$dat")" "$(dirname "$table")"
common=(--data "$data" --epochs "$epochs" --batch "$batch" --quiet)
[ "$train" = 0 ] || common+=(--train "$train")

bench_tmp
rows=$BENCH_TMP/rows.csv   # this invocation's rows, appended to the CSV at the end
BENCH_CSV=$rows BENCH_TOTAL=$((1 + ${#GRID[@]})) BENCH_WIDTH=16
echo "hybrid-grid: $data$([ "$train" = 0 ] || echo " (first $train)"), batch $batch, $epochs epochs, P x T ${GRID[*]}," \
     "$SWEEP_CORES cores$([ "$SWEEP_CORES" = "$cores" ] || echo " ($cores real)"); rows -> $csv"
# serial pinned to the second CPU of this job's own CPU set (the first when it has one): a
# Slurm job's set need not hold CPUs 0 or 1
own_cpu=$(taskset -pc $$ | awk -F': ' '{ n = 0; m = split($2, r, ","); for (i = 1; i <= m && n < 2; i++) {
  k = split(r[i], e, "-"); lo = e[1]; hi = (k > 1 ? e[2] : e[1]); for (c = lo; c <= hi && n < 2; c++) cpu[++n] = c }
  print cpu[n] }')
bench_run "serial" taskset -c "$own_cpu" serial/serial "${common[@]}"
for pt in "${GRID[@]}"; do
  p=${pt%x*} t=${pt#*x}
  policy=(); [ $((p * t)) -le "$cores" ] || policy=(OMP_WAIT_POLICY=passive)
  bench_run "hybrid ${p}x$t" env "${policy[@]}" scripts/mpirun.sh --bind-to-none "$p" hybrid/hybrid "${common[@]}" \
    --threads "$t" --sync allreduce
done
bench_append "$rows" "$csv"   # all rows at once: an interrupted run leaves the CSV as it was

# the points (P T epoch_s speedup policy) and seed report 001's Table 4, from this run's rows
"$PY" scripts/bench_tables.py hybrid-grid "$rows" --dat "$dat" --table "$table" --data "$data" --batch "$batch" \
  --epochs "$epochs" --cores "$SWEEP_CORES"

if [ "$plotdir" = none ]; then
  :
elif [ "$(basename "$csv")" != hybrid-grid.csv ]; then
  echo "plot skipped: scripts/plot.sh draws hybrid-grid.png from a CSV named hybrid-grid.csv"
else
  scripts/plot.sh --results "$(dirname "$csv")" --plots "$plotdir" --only hybrid-grid || echo "plot failed"
fi

echo "table: $table"
cat "$table"
