#!/usr/bin/env bash
# bench/comm.sh — bench/comm (the trainers' gradient exchanges timed OSU-style) at each rank
# count of --ranks-list, on this machine or across hosts through a launcher prefix.
#
# For each P: one run of bench/comm (allreduce, reduce-bcast, hierarchical, iallreduce and
# barrier at 4 B .. 4 MB and the trainers' gradient bytes, OSU's way: docs/comm.md) under the
# benchmark lock /tmp/partrain-bench.lock with its other load measured and shown (bench_run
# in scripts/lib.sh).
# Writes: the rows of every P appended to --csv at the end, at once (bench/comm's header
#   transport,op,ranks,nodes,ranks_per_node,bytes,repeat,warmup,iterations,min_us,avg_us,
#   max_us,algbw_gbs,busbw_gbs,timestamp; an interrupted run leaves the CSV as it was), and
#   the tables to --dat (one gnuplot index per P, in --ranks-list's order, blocks separated
#   by two blank lines).
#
# Usage: bench/comm.sh [--ranks-list "2 3 4 5 6 7 8"] [--transport LABEL] [--launcher PREFIX]
#                      [--csv FILE] [--dat FILE]
#                      [-- BENCH/COMM ARGS...]
#   --ranks-list L  rank counts, space-separated (default "2 3 4 5 6 7 8")
#   --transport T   the CSV's transport label (default shm): shm, tcp (simulated hosts,
#                   unshaped), tcp-1gbit, tcp-10gbit, tcp-25gbit (veths shaped by tc tbf)
#   --launcher P    the command that starts the ranks, {P} standing for the rank count
#                   (default 'scripts/mpirun.sh {P}'). Across the simulated hosts of
#                   scripts/localcluster.sh, e.g. 3 hosts, ranks spread over them by Slurm:
#                     scripts/localcluster.sh up 3; scripts/localcluster.sh rate 1gbit
#                     bench/comm.sh --transport tcp-1gbit --ranks-list "3 6" \
#                       --launcher 'scripts/localcluster.sh exec ctl salloc -N 3 scripts/mpirun.sh {P}'
#                   A prefix without {P} starts its own fixed rank count (e.g. 'scripts/
#                   localcluster.sh exec ctl srun --mpi=pmix -N 3 --ntasks-per-node=2'): it
#                   runs once, and --ranks-list may not be given
#   --csv FILE      rows appended here (default results/comm.csv; none: no rows)
#   --dat FILE      the tables (default results/comm-TRANSPORT.dat; none: no file)
#   -- ARGS         passed to bench/comm (e.g. -- --iters 200 --repeats 10 --max-bytes 65536;
#                   bench/comm --help)
# Environment: PARTRAIN_RANKS_PER_NODE=K (pseudo-nodes of K ranks for the hierarchical
#   allreduce on one machine; common/mpi_util.h).
# Exit status: 0; 1 when a run fails; 2 on a usage error or a missing prerequisite; each
# with its reason on stderr.
set -euo pipefail
export LC_ALL=C   # numbers in awk/printf/sort do not depend on the locale
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

HEADER=transport,op,ranks,nodes,ranks_per_node,bytes,repeat,warmup,iterations,min_us,avg_us,max_us,algbw_gbs,busbw_gbs,timestamp
ranks_list="2 3 4 5 6 7 8" ranks_given=0 transport=shm launcher='scripts/mpirun.sh {P}' csv=results/comm.csv dat=""
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks-list) need_value "$@"; ranks_list=$2 ranks_given=1; shift 2 ;;
    --transport)  need_value "$@"; transport=$2; shift 2 ;;
    --launcher)   need_value "$@"; launcher=$2; shift 2 ;;
    --csv)        need_value "$@"; csv=$2; shift 2 ;;
    --dat)        need_value "$@"; dat=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[ -n "$(tr -d ' ' <<<"$ranks_list")" ] || die "--ranks-list: empty"
for p in $ranks_list; do [[ $p =~ ^[1-9][0-9]*$ ]] || die "--ranks-list: not a positive integer: '$p'"; done
[[ $transport =~ ^[a-z0-9._-]{1,32}$ ]] || die "--transport: expected a label of a-z 0-9 - _ . (at most 32), got '$transport'"
[ -n "$dat" ] || dat=results/comm-$transport.dat
if [[ $launcher != *"{P}"* ]]; then
  [ $ranks_given = 0 ] || die "--ranks-list with a --launcher that has no {P}: the launcher fixes the rank count"
  ranks_list=launcher
fi
read -r -a launch_words <<<"$launcher"
command -v "${launch_words[0]}" >/dev/null || [ -x "${launch_words[0]}" ] || die "--launcher: '${launch_words[0]}' not found"
need_built bench/comm
need_tools flock
if [ "$csv" != none ]; then
  mkdir -p "$(dirname "$csv")"
  [ ! -s "$csv" ] || [ "$(head -n 1 "$csv")" = "$HEADER" ] ||
    die "$csv: its header is not bench/comm's ($(head -n 1 "$csv" | cut -c1-60)...): move it away or give another --csv"
fi
[ "$dat" = none ] || mkdir -p "$(dirname "$dat")"
for a in "${extra[@]}"; do
  case $a in --csv|--dat|--transport) die "-- $a: give it to bench/comm.sh itself (it collects every run's output)" ;; esac
done
# bench/comm's own flags, checked once here (one line, exit 2) rather than by every run
bench_tmp
bench/comm "${extra[@]}" --help >/dev/null 2>"$BENCH_TMP/err" || die "bench/comm ${extra[*]}: $(head -n 1 "$BENCH_TMP/err")"

rows=$BENCH_TMP/rows.csv
BENCH_TOTAL=$(wc -w <<<"$ranks_list") BENCH_WIDTH=12 BENCH_CUT=200
echo "comm: transport $transport, ranks $ranks_list, launcher '$launcher'; rows -> $csv, tables -> $dat"
k=0
for p in $ranks_list; do
  k=$((k + 1))
  words=("${launch_words[@]//\{P\}/$p}")
  args=(bench/comm --transport "$transport" --csv "$rows" --dat "$BENCH_TMP/$k.dat" "${extra[@]}")
  label=$([ "$p" = launcher ] && echo "launcher" || echo "P=$p")
  bench_run "$label" "${words[@]}" "${args[@]}"
done
if [ "$dat" != none ]; then
  for ((i = 1; i <= k; i++)); do
    [ $i = 1 ] || printf '\n\n'
    cat "$BENCH_TMP/$i.dat"
  done >"$BENCH_TMP/all.dat"
  mv -f "$BENCH_TMP/all.dat" "$dat"
fi
[ "$csv" = none ] || append_rows "$rows" "$csv"   # all rows at once
echo "comm: $(( $(wc -l <"$rows") - 1 )) rows$([ "$csv" = none ] || echo " appended to $csv")$([ "$dat" = none ] || echo ", tables in $dat")"
