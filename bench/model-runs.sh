#!/usr/bin/env bash
# bench/model-runs.sh — the trainer runs the alpha-beta model (scripts/model.py) is fitted
# to and validated on, in one CSV: results/model-runs.csv.
#
# serial/serial (one core) at several batches (its compute time per step t(b)) and
# openmp/openmp --accum reduction (hybrid's threads) and --accum owner (mpi/shm's
# scheme) at those batches for each thread count of --openmp (the model's thread
# efficiency per batch): the model's inputs; then, what it
# is checked against, mpi/mpi for every --sync variant mpi/mpi --list-variants names at
# each rank count and batch, and hybrid/hybrid at each PxT given. Every run goes through bench_run
# (scripts/lib.sh: the benchmark lock, the other load measured, columns other_load_cores,
# disturbed) and its row gets four more columns:
#   transport,nodes,ranks_per_node,physical_cores
# (--transport; --nodes; ranks / nodes; nproc of this machine, which on the simulated
# cluster all simulated hosts share). Serial rows: nodes 1, ranks_per_node 1.
#
# Usage: bench/model-runs.sh [--transport LABEL] [--nodes N] [--launcher PREFIX]
#                            [--ranks "1 C"] [--batches "64 512"] [--hybrid "1xC Cx1"]
#                            [--openmp "C"] [--serial-batches "8 16 ... 1024"] [--no-serial]
#                            [--data DIR] [--train N] [--epochs E] [--runs R] [--csv FILE]
#                            [--no-beside] [--tries N] [--max-other C] [--idle-wait S]
#   --transport L   the label of the CSV's transport column, as in results/comm.csv
#                   (default shm: one host, shared memory)
#   --nodes N       hosts the ranks are spread over (default 1); ranks_per_node = ranks / N
#   --launcher P    the command prefix that starts the ranks (default
#                   'scripts/mpirun.sh {ranks}', hybrid: with --bind-to-none); {ranks},
#                   {nodes}, {per_node} are replaced, e.g. across simulated hosts
#                   'scripts/localcluster.sh exec ctl srun --mpi=pmix -N {nodes} --ntasks-per-node={per_node}'
#   (C: this machine's cores, nproc; the defaults keep a core per rank x thread, the
#   model's domain: docs/model.md)
#   --ranks L       mpi/mpi's rank counts (default "1 C"; "" for none)
#   --batches L     global batches of the mpi and hybrid runs (default "64 512")
#   --hybrid L      hybrid/hybrid's PxT configurations (default "1xC Cx1"; "" for none)
#   --openmp L      openmp/openmp's thread counts, each at every --serial-batches batch
#                   (default: the thread counts above 1 of --hybrid; "" for none)
#   --serial-batches L  serial/serial's (and openmp's) batches (default "8 16 32 64 128 256 512 1024")
#   --no-serial     no serial and no openmp runs (e.g. a second transport added to the same CSV)
#   --data DIR      data set (default data/fashion)
#   --train N       the first N training samples (default 10000)
#   --epochs E      epochs per run (default 3: the median is over epochs 2..E)
#   --runs R        repetitions of the whole set (default 1)
#   --csv FILE      where the rows go (default results/model-runs.csv, appended)
#   --no-beside     no bench/comm beside the runs (by default, just before every mpi and
#                   hybrid run with P > 1, bench/comm times that run's exchange, its op at
#                   4 bytes and at the gradient's size over the same ranks and launcher,
#                   into comm-beside.csv next to --csv: what the exchange cost just then, for
#                   comparing by hand; this machine's cores and links drift between stretches
#                   of minutes; the rewritten scripts/model.py does not read it)
#   --tries, --max-other, --idle-wait   as every benchmark (scripts/lib.sh)
# Exit status: 0; 1 when a run fails; 2 on a usage error or a missing prerequisite.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

C=$(nproc)
beside=1 transport=shm nodes=1 launcher="" ranks="1 $C" batches="64 512" hybrid="1x$C ${C}x1" openmp="-"
[ "$C" -gt 1 ] || { ranks=1 hybrid=1x1; }
serial_batches="8 16 32 64 128 256 512 1024" serial=1 data=data/fashion train=10000 epochs=3 runs=1
csv=results/model-runs.csv
while [ $# -gt 0 ]; do
  case "$1" in
    --transport) need_value "$@"; transport=$2; shift 2 ;;
    --nodes)     need_value "$@"; nodes=$2; shift 2 ;;
    --launcher)  need_value "$@"; launcher=$2; shift 2 ;;
    --ranks)     [ $# -ge 2 ] || die "--ranks needs a value"; ranks=$2; shift 2 ;;
    --batches)   need_value "$@"; batches=$2; shift 2 ;;
    --hybrid)    [ $# -ge 2 ] || die "--hybrid needs a value"; hybrid=$2; shift 2 ;;
    --openmp)    [ $# -ge 2 ] || die "--openmp needs a value"; openmp=$2; shift 2 ;;
    --no-beside) beside=0; shift ;;
    --serial-batches) need_value "$@"; serial_batches=$2; shift 2 ;;
    --no-serial) serial=0; shift ;;
    --data)      need_value "$@"; data=$2; shift 2 ;;
    --train)     need_value "$@"; train=$2; shift 2 ;;
    --epochs)    need_value "$@"; epochs=$2; shift 2 ;;
    --runs)      need_value "$@"; runs=$2; shift 2 ;;
    --csv)       need_value "$@"; csv=$2; shift 2 ;;
    --tries|--max-other|--idle-wait) need_value "$@"; bench_load_option "$1" "$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $transport =~ ^[A-Za-z0-9._-]+$ ]] || die "--transport: letters, digits, . _ - only: '$transport'"
for v in nodes train epochs runs; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--$v: not a positive integer: '${!v}'"; done
[ "$epochs" -ge 2 ] || die "--epochs must be >= 2 (the median is over epochs 2..E)"
for b in $batches $serial_batches; do [[ $b =~ ^[1-9][0-9]*$ ]] || die "batch not a positive integer: '$b'"; done
for p in $ranks; do
  [[ $p =~ ^[1-9][0-9]*$ ]] || die "--ranks: not a positive integer: '$p'"
  [ $((p % nodes)) -eq 0 ] || [ "$p" -lt "$nodes" ] || die "--ranks $p: not a multiple of --nodes $nodes"
done
for pt in $hybrid; do [[ $pt =~ ^[1-9][0-9]*x[1-9][0-9]*$ ]] || die "--hybrid: not PxT: '$pt'"; done
if [ "$openmp" = - ]; then   # hybrid's thread counts above 1, once each
  openmp=$(for pt in $hybrid; do t=${pt#*x}; [ "$t" -lt 2 ] || echo "$t"; done | sort -un | tr '\n' ' ')
fi
[ "$serial" = 1 ] || openmp=""
for t in $openmp; do [[ $t =~ ^[1-9][0-9]*$ ]] || die "--openmp: not a positive integer: '$t'"; done
need_tools flock taskset
[ -n "$launcher" ] || need_tools mpirun
need_built serial/serial mpi/mpi mpi/shm
[ "$beside" = 0 ] || need_built bench/comm
[ -z "$hybrid" ] || need_built hybrid/hybrid
[ -z "$openmp" ] || need_built openmp/openmp
[ -d "$data" ] || die "$data missing (run: scripts/get-data.sh)"
load_variants mpi/mpi || exit 2
# mpi/shm (MPI+MPI) is its own program; its rows are the CSV's mpi shm, beside mpi/mpi's
declare -A VARIANT_BIN=(); for s in "${VARIANTS[@]}"; do VARIANT_BIN[$s]=mpi/mpi; done
VARIANTS+=(shm) VARIANT_FLAGS[shm]="--sync shm" VARIANT_BIN[shm]=mpi/shm
EXTRA=transport,nodes,ranks_per_node,physical_cores
want_header="$(bench_results_header),$BENCH_COLS,$EXTRA"
mkdir -p "$(dirname "$csv")"
if [ -s "$csv" ] && [ "$(head -n 1 "$csv")" != "$want_header" ]; then
  die "$csv: not a model-runs CSV (its header is not the trainers' schema + $BENCH_COLS,$EXTRA): move it away or give another --csv"
fi
cores=$(nproc)

# launch P PER_NODE NODES BIND: the launcher's words for P ranks in LAUNCH
launch() {
  local p=$1 n=$3 prefix
  if [ -z "$launcher" ]; then
    LAUNCH=(scripts/mpirun.sh); [ "$4" = 0 ] || LAUNCH+=(--bind-to-none); LAUNCH+=("$p")
    return
  fi
  prefix=${launcher//\{ranks\}/$p}; prefix=${prefix//\{nodes\}/$n}; prefix=${prefix//\{per_node\}/$2}
  read -r -a LAUNCH <<<"$prefix"
}

# one_run LABEL NODES PER_NODE CMD...: bench_run into a fresh CSV, then its row with the
# four model columns appended to $csv (append_rows: all or nothing)
bench_tmp
one_run() {
  local label=$1 n=$2 pn=$3; shift 3
  rm -f "$BENCH_TMP/one.csv"
  BENCH_CSV=$BENCH_TMP/one.csv bench_run "$label" "$@"
  awk -v x="$transport,$n,$pn,$cores" -v c="$EXTRA" '{ sub(/\r$/, "") } NR == 1 { print $0 "," c; next } { print $0 "," x }' \
    "$BENCH_TMP/one.csv" >"$BENCH_TMP/rows.csv"
  append_rows "$BENCH_TMP/rows.csv" "$csv"
}

# beside OP NODES PER_NODE: bench/comm's OP (none: nothing) over the ranks LAUNCH starts,
# just before the run it is for; a failure is said and the runs go on (the prediction
# then has no same-round variant)
beside_csv=$(dirname "$csv")/comm-beside.csv
beside() {
  [ "$beside" = 1 ] && [ -n "$1" ] || return 0
  "${LAUNCH[@]}" bench/comm --transport "$transport" --ops "$1" --min-bytes 4 --max-bytes 4 --model-sides 28 --iters 20 --warmup 5 \
    --csv "$beside_csv" >"$BENCH_TMP/beside.out" 2>&1 ||
    echo "model-runs: bench/comm beside the next run failed: $(tail -n 1 "$BENCH_TMP/beside.out")" >&2
}
# the bench/comm op of mpi --sync S's exchange at P ranks
beside_op() {
  local s=$1 p=$2 n=$3 pn=$4
  [ "$p" -gt 1 ] || return 0
  case $s in
    overlap) echo iallreduce ;;
    shm) [ "$n" -gt 1 ] && [ "$pn" = 1 ] && echo allreduce ;;
    *) echo "$s" ;;
  esac
  return 0
}

common=(--data "$data" --train "$train" --epochs "$epochs" --quiet)
# serial pinned to the first CPU of this job's own CPU set (a Slurm job's set need not hold CPU 0)
own_cpu=$(taskset -pc $$ | awk -F': ' '{ split($2, c, /[-,]/); print c[1] }')
ser=(env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c "$own_cpu" serial/serial)
ns=$([ "$serial" = 1 ] && wc -w <<<"$serial_batches" || echo 0)
nh=$(wc -w <<<"$hybrid")
BENCH_TOTAL=$(( runs * (ns * (1 + 2 * $(wc -w <<<"$openmp")) + $(wc -w <<<"$ranks") * $(wc -w <<<"$batches") * ${#VARIANTS[@]} + nh * $(wc -w <<<"$batches")) ))
echo "model-runs: transport $transport, $nodes node(s), $data (first $train), $epochs epochs x $runs run(s)," \
     "$cores cores; rows -> $csv"
for _ in $(seq 1 "$runs"); do
  if [ "$serial" = 1 ]; then
    for b in $serial_batches; do
      one_run "serial b$b" 1 1 "${ser[@]}" --batch "$b" "${common[@]}"
      for t in $openmp; do
        pol=(); [ "$t" -le "$cores" ] || pol=(env OMP_WAIT_POLICY=passive)
        for a in reduction owner; do
          one_run "openmp $a T=$t b$b" 1 1 "${pol[@]}" openmp/openmp --accum "$a" --threads "$t" --batch "$b" "${common[@]}"
        done
      done
    done
  fi
  for b in $batches; do
    for p in $ranks; do
      n=$(( p < nodes ? p : nodes )); pn=$(( p / n ))
      launch "$p" "$pn" "$n" 0
      for s in "${VARIANTS[@]}"; do
        beside "$(beside_op "$s" "$p" "$n" "$pn")"
        # shellcheck disable=SC2086  # the variant's flags, e.g. "--sync allreduce"
        one_run "mpi $s P=$p b$b" "$n" "$pn" "${LAUNCH[@]}" "${VARIANT_BIN[$s]}" ${VARIANT_FLAGS[$s]} --batch "$b" "${common[@]}"
      done
    done
    for pt in $hybrid; do
      p=${pt%x*} t=${pt#*x}
      n=$(( p < nodes ? p : nodes )); pn=$(( p / n ))
      launch "$p" "$pn" "$n" 1
      pol=(); [ $((p * t)) -le "$cores" ] || pol=(env OMP_WAIT_POLICY=passive)
      [ "$p" -le 1 ] || beside allreduce
      one_run "hybrid ${p}x$t b$b" "$n" "$pn" "${pol[@]}" "${LAUNCH[@]}" hybrid/hybrid --threads "$t" --batch "$b" "${common[@]}"
    done
  done
done
echo "model-runs: $BENCH_K run(s) -> $csv (scripts/model.py validate compares them with the model)"
