#!/usr/bin/env bash
# bench/model-validate.sh — the measurements behind scripts/model.py validate's table
# (docs/model.md): bench/comm with fixed counts and --repeats runs at P = 2 (the fit) and at
# P = 3, 4, 8 (held out), on shared memory and across simulated hosts over shaped links
# (scripts/localcluster.sh: 4 hosts at --rate; P = 2, 3, 4 one rank per host, P = 8 two),
# then the table. Writes DIR/comm.csv (all rows), DIR/validation.txt (`scripts/model.py
# validate --comm DIR/comm.csv`, byte for byte what the test reproduces) and DIR/README.md
# (date, CPU from lscpu, the commands, other load).
#
# Usage: bench/model-validate.sh [--dir DIR] [--repeats R] [--rate RATE|none] [-- BENCH/COMM ARGS]
#   --dir DIR      where the three files go (default results/reference/model; an existing
#                  DIR/comm.csv is refused: move it away first)
#   --repeats R    bench/comm --repeats (default 10)
#   --rate RATE    the simulated links' rate (default 1gbit); none: shared memory only (also
#                  when not root: the cluster needs namespaces)
#   -- ARGS        more bench/comm flags (default: --ops allreduce,reduce-bcast --max-bytes
#                  262144 --model-sides 28 --iters 30 --iters-large 10 --large-bytes 65536
#                  --warmup 5)
# Exit status: 0; 1 when a run fails; 2 on a usage error.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "${BASH_SOURCE[0]}")/.."
die() { echo "model-validate: $*" >&2; exit 2; }
dir=results/reference/model repeats=10 rate=1gbit
# shellcheck disable=SC2054  # commas inside bench/comm values
comm=(--ops allreduce,reduce-bcast --max-bytes 262144 --model-sides 28 --iters 30 --iters-large 10 --large-bytes 65536 --warmup 5)
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) [ $# -ge 2 ] || die "--dir needs a value"; dir=$2; shift 2 ;;
    --repeats) [ $# -ge 2 ] || die "--repeats needs a value"; repeats=$2; shift 2 ;;
    --rate) [ $# -ge 2 ] || die "--rate needs a value"; rate=$2; shift 2 ;;
    --) shift; comm=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats: a positive integer, got '$repeats'"
[ -x bench/comm ] || die "bench/comm not built (make bench/comm)"
[ ! -e "$dir/comm.csv" ] || die "$dir/comm.csv exists: move it away first"
[ "$(id -u)" = 0 ] || rate=none
mkdir -p "$dir"
tmp=$(mktemp -d /tmp/partrain-model-validate-XXXXXX)
LC=(scripts/localcluster.sh --name pvalid --dir "$tmp/cluster")
trap '[ "$rate" = none ] || "${LC[@]}" down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
load0=$(cut -d' ' -f1 /proc/loadavg)

for p in 2 3 4 8; do
  echo "model-validate: shm P=$p"
  scripts/mpirun.sh "$p" bench/comm --transport shm --repeats "$repeats" "${comm[@]}" --csv "$tmp/comm.csv" | tail -n 1
done
if [ "$rate" != none ]; then
  "${LC[@]}" up 4
  "${LC[@]}" rate "$rate"
  for pn in 2:2 3:3 4:4 8:4; do
    p=${pn%:*} n=${pn#*:}
    echo "model-validate: tcp-$rate P=$p on $n hosts"
    "${LC[@]}" exec ctl env SLURM_CPU_BIND=none salloc --quiet -N "$n" scripts/mpirun.sh "$p" bench/comm --transport "tcp-$rate" \
      --repeats "$repeats" "${comm[@]}" --csv "$tmp/comm.csv" | tail -n 1
  done
fi
cp "$tmp/comm.csv" "$dir/comm.csv"
python3 scripts/model.py validate --comm "$dir/comm.csv" >"$dir/validation.txt"
{
  echo "# scripts/model.py's validation data"
  echo
  echo "Measured $(date -u +%Y-%m-%dT%H:%MZ) by \`bench/model-validate.sh --repeats $repeats --rate $rate -- ${comm[*]}\`"
  echo "on $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) CPUs; load average $load0 before,"
  echo "$(cut -d' ' -f1 /proc/loadavg) after (other jobs shared the machine: the spread column says how much)."
  echo "Links of the simulated hosts: ${rate} (tc tbf, scripts/localcluster.sh), all hosts on this one machine."
  echo
  echo "\`python3 scripts/model.py validate --comm $dir/comm.csv\` prints validation.txt (tests/test_model.sh checks it)."
} >"$dir/README.md"
tail -n 4 "$dir/validation.txt"
