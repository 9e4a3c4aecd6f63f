#!/usr/bin/env bash
# bench/cluster-bench.sh — partrain across simulated hosts: a real Slurm cluster of N hosts
# on this machine (scripts/localcluster.sh: network namespaces, veth links shaped by tc tbf),
# measured at several link rates, for the alpha-beta model (scripts/model.py).
#
# Brings the cluster up (and always down again at exit), then for each rate of --rates:
# shapes every link to it and runs bench/comm.sh at P = N and 2N ranks (1 and 2 per host)
# with the transport label tcp-RATE -> DIR/comm.csv, DIR/comm-tcp-RATE.dat; at each rate
# of --run-rates also the trainers (bench/model-runs.sh: mpi/mpi with every --sync at
# P = N, and 2N when this machine has 2N cores, batches 64 and 512, no serial rows) ->
# DIR/model-runs.csv: the model is checked where every rank has a core (docs/model.md). Ranks are
# started by Slurm: `salloc -N N scripts/mpirun.sh P` inside the controller's namespace
# (scripts/mpirun.sh then launches with srun --mpi=pmix). The hosts share this machine's
# cores, so ranks yield when they wait (localcluster exports mpi_yield_when_idle); the
# model takes the sharing into account (the CSV's physical_cores column).
# This kernel has no netem: links get a rate, not a delay (docs/cluster.md).
#
# Usage: bench/cluster-bench.sh [--hosts N] [--rates "1gbit 10gbit 25gbit"]
#                               [--run-rates "10gbit"] [--train N] [--runs R] [--dir DIR] [--quick]
#   --hosts N        simulated hosts (default: this machine's cores, 2 to 4: at P = N every
#                    rank has a core of its own, the model's domain; P = 2N shares them)
#   --rates L        link rates of the comm runs (default "1gbit 10gbit 25gbit")
#   --run-rates L    link rates of the trainer runs (default "10gbit"; "" for none)
#   --train N        training samples of the trainer runs (default 10000; --quick: 4000)
#   --runs R         repetitions of the trainer runs (default 2; --quick: 1): over shaped
#                    TCP links one run varies by more than the model's 20 % (NOTES 28)
#   --dir DIR        where comm.csv, comm-tcp-*.dat and model-runs.csv go (default results)
#   --quick          comm up to 1 MiB only, trainer runs on 4000 samples
# Needs root and the packages of scripts/localcluster.sh (scripts/setup.sh installs them);
# without them: one line naming what is missing, exit 2.
# Exit status: 0; 1 when a run fails; 2 on a usage error or a missing prerequisite.
set -euo pipefail
export LC_ALL=C   # numbers in awk/printf/sort do not depend on the locale
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

hosts=$(nproc); [ "$hosts" -ge 2 ] || hosts=2; [ "$hosts" -le 4 ] || hosts=4
rates="1gbit 10gbit 25gbit" run_rates="10gbit" train="" runs="" dir=results quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) need_value "$@"; hosts=$2; shift 2 ;;
    --rates) need_value "$@"; rates=$2; shift 2 ;;
    --run-rates) [ $# -ge 2 ] || die "--run-rates needs a value"; run_rates=$2; shift 2 ;;
    --train) need_value "$@"; train=$2; shift 2 ;;
    --runs) need_value "$@"; runs=$2; shift 2 ;;
    --dir) need_value "$@"; dir=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $hosts =~ ^[1-9][0-9]*$ ]] && [ "$hosts" -ge 2 ] || die "--hosts: an integer >= 2, got '$hosts'"
[ -n "$train" ] || train=$([ $quick = 1 ] && echo 4000 || echo 10000)
[[ $train =~ ^[1-9][0-9]*$ ]] || die "--train: not a positive integer: '$train'"
[ -n "$runs" ] || runs=$([ $quick = 1 ] && echo 1 || echo 2)
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs: not a positive integer: '$runs'"
for r in $rates $run_rates; do [[ $r =~ ^[1-9][0-9]*[kmg]bit$ ]] || die "rate '$r': like 1gbit, 10gbit, 500mbit"; done
for r in $run_rates; do [[ " $rates " == *" $r "* ]] || die "--run-rates: '$r' is not one of --rates ($rates)"; done
need_built bench/comm mpi/mpi
[ -d data/fashion ] || die "data/fashion missing (run: scripts/get-data.sh)"
mkdir -p "$dir"

LC=(scripts/localcluster.sh --name pbench --dir /tmp/partrain-cluster-bench)
bench_at_exit "${LC[*]} down >/dev/null 2>&1 || true"
"${LC[@]}" up "$hosts" || exit $?
# the ranks run under the hosts' slurmd, not this script: their CPU time is the runs' own
BENCH_OWN_CPU_NS="${LC[*]} cpu-usage"
$BENCH_OWN_CPU_NS >/dev/null 2>&1 || BENCH_OWN_CPU_NS=""
export BENCH_OWN_CPU_NS
# SLURM_CPU_BIND=none: the hosts share this machine's CPUs, and task/affinity would bind every
# host's rank to the same CPU 0 (docs/cluster.md)
salloc_launch="${LC[*]} exec ctl env SLURM_CPU_BIND=none salloc --quiet -N $hosts scripts/mpirun.sh"
run_ranks=$hosts; [ $((2 * hosts)) -gt "$(nproc)" ] || run_ranks+=" $((2 * hosts))"
# bench/comm's fixed counts (100 timed calls below 1 MB, 20 from there on, 20 warm-ups), 3
# repeats per size so that each row's spread is known
comm_extra=(-- --repeats 3); [ $quick = 0 ] || comm_extra=(-- --repeats 3 --max-bytes 1048576)
for r in $rates; do
  "${LC[@]}" rate "$r"
  echo "cluster-bench: $hosts hosts, links $r (tc tbf), comm at P = $hosts and $((2 * hosts))"
  bench/comm.sh --transport "tcp-$r" --ranks-list "$hosts $((2 * hosts))" --launcher "$salloc_launch {P}" \
    --csv "$dir/comm.csv" --dat "$dir/comm-tcp-$r.dat" "${comm_extra[@]}"
  if [[ " $run_rates " == *" $r "* ]]; then
    bench/model-runs.sh --no-serial --hybrid "" --transport "tcp-$r" --nodes "$hosts" \
      --ranks "$run_ranks" --batches "64 512" --train "$train" --runs "$runs" \
      --launcher "${LC[*]} exec ctl env SLURM_CPU_BIND=none salloc --quiet -N {nodes} scripts/mpirun.sh {ranks}" --csv "$dir/model-runs.csv"
  fi
done
echo "cluster-bench: done -> $dir/comm.csv$([ -z "$run_rates" ] || echo ", $dir/model-runs.csv")"
