#!/usr/bin/env bash
# bench/corun.sh — N copies of one command at once, copy i pinned to core i (taskset -c i):
# what N cores give when each works alone on its own data, with no communication at all.
# bench/openmp-bench.sh and bench/hybrid-bench.sh run serial this way in every round for
# their per-round core bound (N x serial's epoch alone / the slowest copy's epoch at once,
# bench_corun in scripts/lib.sh): no strategy that splits one step over N cores can beat
# N independent copies of the whole step.
#
# Usage: bench/corun.sh N CMD [ARGS...]
#   N     copies, 1..the machine's CPUs (nproc): above them the copies would share cores
# Output: each copy's output in copy order, each line prefixed "copy I: ".
# Exit status: 0 when every copy exits 0; 1 when one fails (its status on stderr); 2 on a
# usage error, with its reason on stderr.
export LC_ALL=C
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

case ${1:-} in
  -h|--help) bench_usage; exit 0 ;;
  -*) die "unknown option '$1' (see --help)" ;;
esac
[ $# -ge 2 ] || die "usage: bench/corun.sh N CMD [ARGS...] (see --help)"
n=$1; shift
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)   # nproc obeys OMP_NUM_THREADS
[[ $n =~ ^[1-9][0-9]*$ ]] && [ "$n" -le "$cpus" ] || die "N: expected 1..$cpus (the CPUs), got '$n'"
need_tools taskset
command -v "$1" >/dev/null || die "$1: no such command"
bench_tmp

pids=()
for ((i = 0; i < n; i++)); do
  taskset -c "$i" "$@" >"$BENCH_TMP/out.$i" 2>&1 &
  pids+=($!)
done
rc=0
for ((i = 0; i < n; i++)); do
  st=0; wait "${pids[$i]}" || st=$?
  sed "s/^/copy $i: /" "$BENCH_TMP/out.$i"
  if [ $st -ne 0 ]; then echo "corun: copy $i exited $st" >&2; rc=1; fi
done
exit $rc
