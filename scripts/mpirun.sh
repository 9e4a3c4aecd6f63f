#!/usr/bin/env bash
# scripts/mpirun.sh — the one way partrain launches MPI programs (tests, benchmarks, run_all.sh),
# on this machine, on the hosts of a hostfile, or inside a Slurm allocation.
#
# Usage: scripts/mpirun.sh [--bind-to-none] [--hostfile FILE] [--dry-run] P COMMAND [ARGS...]
#   P               number of ranks
#   --bind-to-none  do not pin ranks to cores: needed when a rank runs threads (OpenMP),
#                   because mpirun pins each rank to ONE core when P <= 2 (under srun:
#                   --cpu-bind=none)
#   --hostfile FILE mpirun --hostfile FILE: the ranks go to FILE's hosts ("HOST slots=N" lines);
#                   also taken from PARTRAIN_HOSTFILE. Ignored inside a Slurm allocation,
#                   whose nodes are the hosts
#   --dry-run       print the exact command (with its environment) instead of running it
# Where it runs:
#   outside Slurm   mpirun --mca pml ob1 --mca btl_vader_... -np P [--hostfile FILE] COMMAND
#   in a Slurm allocation (SLURM_JOB_ID set): srun --mpi=pmix --kill-on-bad-exit=1 -N min(P,
#                   nodes) -n P COMMAND (a failing rank ends the step, as under mpirun; Debian's OpenMPI
#                   4.1 starts under Slurm's pmix plugin; --mpi=pmi2 does not), or mpirun
#                   (which reads the allocation and starts its daemons with srun) when this
#                   srun has no pmix plugin; PARTRAIN_LAUNCHER=srun|mpirun forces one.
#                   With SLURM_CPUS_PER_TASK set (sbatch --cpus-per-task): srun --cpus-per-task
#                   of it (each rank bound to that many CPUs, not --cpu-bind=none) and the
#                   ranks' OMP_NUM_THREADS of it unless already set
# Settings, the same everywhere (under srun as OMPI_MCA_* variables, as mpirun's --mca):
#   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   OpenMPI refuses root otherwise
#   pml ob1          skips probing the UCX/OFI stacks: ~150 ms start-up, not ~370 ms
#   btl_vader_single_copy_mechanism none, btl_vader_max_send_size 131072
#                    ranks on one host copy through shared-memory buffers in 128 KB
#                    fragments instead of CMA (process_vm_readv, a system call per
#                    message), faster at every gradient size measured (docs/NOTES.md 32);
#                    unless MPIRUN_ARGS or an OMPI_MCA_* variable sets them
#   more ranks per host than its cores (P > this machine's cores; with --hostfile, P > the
#   file's slots; under srun, ranks per node > the allocation's CPUs per node):
#                    --oversubscribe (srun: --overcommit) and mpi_yield_when_idle 1, which lets
#                    a rank that waits in MPI yield its core instead of spinning on it
#   an OMPI_MCA_mpi_yield_when_idle already in the environment is kept (scripts/localcluster.sh
#   sets it: its hosts share one machine's cores)
# Environment: MPIRUN (default mpirun), SRUN (default srun), MPIRUN_ARGS (extra mpirun
#   arguments, split on spaces; under srun only "--mca KEY VALUE" pairs, as OMPI_MCA_KEY=VALUE).
# Exit status: that of the launcher (the first failing rank's status), 2 on a usage error,
#   130 (143, 129, 131) when interrupted by SIGINT: Ctrl-C (SIGTERM, SIGHUP, SIGQUIT), with
#   one line saying so; SIGKILL of this script stops the job too.
set -euo pipefail
export LC_ALL=C

usage() { echo "mpirun.sh: $*" >&2; exit 2; }
# The launcher runs as a child, not exec'd, so that an interruption has one answer: on
# SIGINT (Ctrl-C, to this script or its process group), SIGTERM, SIGHUP or SIGQUIT the
# launcher gets SIGTERM, which makes mpirun and srun stop every rank, and this script exits
# 130 (143, 129, 131), the statuses of every partrain program, with one line saying so. The
# launcher also gets SIGTERM when this script dies of SIGKILL (setpriv --pdeathsig), so no
# job outlives it. (In the background a shell without job control starts the launcher with
# SIGINT ignored: the traps forward every signal as TERM.)
launch() {
  local interrupted="" child rc pdeath=()
  setpriv --pdeathsig TERM true 2>/dev/null && pdeath=(setpriv --pdeathsig TERM)
  trap 'interrupted="SIGINT 130"; kill -TERM "$child" 2>/dev/null' INT
  trap 'interrupted="SIGTERM 143"; kill -TERM "$child" 2>/dev/null' TERM
  trap 'interrupted="SIGHUP 129"; kill -TERM "$child" 2>/dev/null' HUP
  trap 'interrupted="SIGQUIT 131"; kill -TERM "$child" 2>/dev/null' QUIT
  "${pdeath[@]}" "$@" <&0 &
  child=$!
  while :; do
    rc=0; wait "$child" || rc=$?
    kill -0 "$child" 2>/dev/null || break   # (wait returned for a trap: the launcher still runs)
  done
  trap - INT TERM HUP QUIT
  if [ -n "$interrupted" ]; then
    echo "mpirun.sh: interrupted (${interrupted% *}): the job was stopped" >&2
    exit "${interrupted#* }"
  fi
  exit $rc
}
bind=0 dry=0 hostfile=${PARTRAIN_HOSTFILE:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --bind-to-none) bind=1; shift ;;
    --dry-run) dry=1; shift ;;
    --hostfile) [ $# -ge 2 ] && [ -n "$2" ] || usage "--hostfile needs a file"; hostfile=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || usage "usage: scripts/mpirun.sh [--bind-to-none] [--hostfile FILE] [--dry-run] P COMMAND [ARGS...]"
p=$1; shift
# P at most 65536 (a bound far above any node or test here; scripts/lib.sh's sweeps share it),
# checked on the digits before any arithmetic (equal lengths: compared as strings)
max_ranks=65536
# shellcheck disable=SC2071
[[ $p =~ ^[1-9][0-9]*$ ]] && { [ ${#p} -lt ${#max_ranks} ] || { [ ${#p} = ${#max_ranks} ] && [[ ! $p > $max_ranks ]]; }; } ||
  usage "P must be an integer from 1 to $max_ranks, got '$p'"
read -r -a extra <<<"${MPIRUN_ARGS:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

launcher=mpirun
if [ -n "${SLURM_JOB_ID:-}" ]; then
  srun=${SRUN:-srun}
  case "${PARTRAIN_LAUNCHER:-}" in
    srun|mpirun) launcher=$PARTRAIN_LAUNCHER ;;
    "") command -v "$srun" >/dev/null && "$srun" --mpi=list 2>&1 | grep -qw pmix && launcher=srun ;;
    *) usage "PARTRAIN_LAUNCHER must be srun or mpirun, got '$PARTRAIN_LAUNCHER'" ;;
  esac
  hostfile=""   # the allocation's nodes are the hosts
fi

# the shared-memory transport's settings (KEY VALUE pairs), each unless already set
vader=()
for kv in "btl_vader_single_copy_mechanism none" "btl_vader_max_send_size 131072"; do
  key=${kv% *} var=OMPI_MCA_${kv% *}
  [[ " ${MPIRUN_ARGS:-} " == *" $key "* ]] || [ -n "${!var:-}" ] || vader+=("$key" "${kv#* }")
done

if [ $launcher = srun ]; then
  command -v "$srun" >/dev/null || usage "$srun not found (apt-get install slurm-client)"
  env=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1)
  for ((i = 0; i < ${#vader[@]}; i += 2)); do env+=("OMPI_MCA_${vader[i]}=${vader[i + 1]}"); done
  nodes=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}
  cores=${SLURM_JOB_CPUS_PER_NODE:-${SLURM_CPUS_ON_NODE:-$(nproc 2>/dev/null || echo 1)}}
  cores=${cores%%[(,]*}   # "4(x3),2": the first node's CPUs
  [[ $nodes =~ ^[1-9][0-9]*$ ]] || nodes=1
  [[ $cores =~ ^[1-9][0-9]*$ ]] || cores=1
  args=(--mpi=pmix --kill-on-bad-exit=1 -N $((p < nodes ? p : nodes)) -n "$p")
  per_node=$(( (p + nodes - 1) / nodes ))
  if [ "$per_node" -gt "$cores" ]; then
    args+=(--overcommit)
    [ -n "${OMPI_MCA_mpi_yield_when_idle:-}" ] || env+=(OMPI_MCA_mpi_yield_when_idle=1)
  fi
  # srun does not inherit sbatch's --cpus-per-task (Slurm >= 22.05): without it, under
  # task/affinity or task/cgroup, each rank gets one CPU for all its threads. With it, a rank's
  # threads are bound to its own CPUs (so no --cpu-bind=none), and OMP_NUM_THREADS defaults to them
  cpt=${SLURM_CPUS_PER_TASK:-}
  if [[ $cpt =~ ^[1-9][0-9]*$ ]]; then
    args+=(--cpus-per-task="$cpt")
    [ -n "${OMP_NUM_THREADS:-}" ] || env+=(OMP_NUM_THREADS="$cpt")
  else
    [ $bind = 0 ] || args+=(--cpu-bind=none)
  fi
  i=0
  while [ $i -lt ${#extra[@]} ]; do
    [ "${extra[$i]}" = --mca ] && [ $((i + 2)) -lt ${#extra[@]} ] ||
      usage "MPIRUN_ARGS under srun takes only '--mca KEY VALUE' pairs, got '${extra[$i]}' (PARTRAIN_LAUNCHER=mpirun for others)"
    env+=("OMPI_MCA_${extra[$((i + 1))]}=${extra[$((i + 2))]}")
    i=$((i + 3))
  done
  if [ $dry = 1 ]; then echo "env ${env[*]} $srun ${args[*]} $*"; exit 0; fi
  launch env "${env[@]}" "$srun" "${args[@]}" "$@"
fi

mpirun=${MPIRUN:-mpirun}
command -v "$mpirun" >/dev/null || usage "$mpirun not found (apt-get install openmpi-bin)"
args=(--mca pml ob1)
for ((i = 0; i < ${#vader[@]}; i += 2)); do args+=(--mca "${vader[i]}" "${vader[i + 1]}"); done
args+=(-np "$p")
if [ -n "$hostfile" ]; then
  [ -f "$hostfile" ] && [ -r "$hostfile" ] || usage "hostfile '$hostfile' not found or not readable"
  # the slots the file offers ("slots=N"; a host without it counts as 1)
  slots=$(awk '{ sub(/#.*/, "") } NF { s = 1; for (i = 2; i <= NF; i++) if ($i ~ /^slots=[0-9]+$/) s = substr($i, 7) + 0; n += s }
               END { print n + 0 }' "$hostfile")
  [ "$slots" -gt 0 ] || usage "hostfile '$hostfile' names no host"
  args+=(--hostfile "$hostfile")
else
  slots=$(nproc 2>/dev/null || echo 1)
fi
[ "$p" -le "$slots" ] || args+=(--oversubscribe --mca mpi_yield_when_idle 1)
[ $bind = 0 ] || args+=(--bind-to none)
args+=("${extra[@]}")
if [ $dry = 1 ]; then echo "$mpirun ${args[*]} $*"; exit 0; fi
if [ -n "$hostfile" ] || [ -n "${SLURM_JOB_ID:-}" ]; then launch "$mpirun" "${args[@]}" "$@"; fi

# A job on this machine: its open files checked first, its files kept in a directory of its own.
# mpirun and its ranks hold about 28 + 4 files per rank (pipes, sockets, segments); below
# that OpenMPI hangs or says "No network interfaces". The soft limit is raised to what is
# needed when the hard limit allows it, else one line says what is short.
need=$((32 + 6 * p)) soft=$(ulimit -Sn) hard=$(ulimit -Hn)
if [ "$soft" != unlimited ] && [ "$soft" -lt "$need" ]; then
  { [ "$hard" = unlimited ] || [ "$hard" -ge "$need" ]; } && ulimit -Sn "$need" ||
    usage "the open-files limit (ulimit -n) is $hard; $p ranks on this machine need at least $need (ulimit -n $need)"
fi
# OpenMPI's session directory (orte_tmpdir_base) and the ranks' shared-memory segments
# (vader_segment.*, btl_vader_backing_directory) go to a private directory in /dev/shm
# (TMPDIR when /dev/shm is not writable), removed when the job's last process that holds
# its lock has gone: a watcher in a session of its own waits for that lock, so a job that
# is killed (SIGKILL of mpirun, or of the whole process group) leaves nothing behind
# either (docs/reliability.md: OpenMPI's leftovers).
base=/dev/shm; [ -d $base ] && [ -w $base ] || base=${TMPDIR:-/tmp}
# (until the watcher runs, a signal removes the directory here; launch() then takes over)
jobdir=""
for sig in "INT 130" "TERM 143" "HUP 129" "QUIT 131"; do
  # shellcheck disable=SC2064  # the status is fixed now, the directory read when it fires
  trap "[ -z \"\$jobdir\" ] || rm -rf -- \"\$jobdir\"; exit ${sig#* }" "${sig% *}"
done
jobdir=$(mktemp -d "$base/partrain-mpi.XXXXXX") || usage "cannot create a directory in $base"
exec 9>"$jobdir/.lock"
if command -v flock >/dev/null && command -v setsid >/dev/null && flock -n 9; then
  setsid bash -c 'trap "" HUP INT TERM QUIT; exec 8>"$1/.lock"; flock 8; rm -rf -- "$1"' \
    mpirun-cleanup "$jobdir" </dev/null >/dev/null 2>&1 9>&- &
else   # no flock: poll for the job's end instead
  setsid bash -c 'trap "" HUP INT TERM QUIT; while kill -0 "$2" 2>/dev/null; do sleep 1; done; rm -rf -- "$1"' \
    mpirun-cleanup "$jobdir" $$ </dev/null >/dev/null 2>&1 9>&- &
fi
export OMPI_MCA_orte_tmpdir_base=$jobdir OMPI_MCA_btl_vader_backing_directory=$jobdir
launch "$mpirun" "${args[@]}" "$@"
