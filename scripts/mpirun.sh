#!/usr/bin/env bash
# scripts/mpirun.sh — the one way partrain launches MPI programs (tests, benchmarks, run_all.sh).
#
# Usage: scripts/mpirun.sh [--bind-to-none] [--dry-run] P COMMAND [ARGS...]
#   P               number of ranks (mpirun -np P)
#   --bind-to-none  do not pin ranks to cores: needed when a rank runs threads (OpenMP),
#                   because mpirun pins each rank to ONE core when P <= 2
#   --dry-run       print the mpirun command line instead of running it
# Settings, the same everywhere:
#   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   OpenMPI refuses root otherwise
#   --mca pml ob1                    skips probing the UCX/OFI stacks: ~150 ms start-up, not ~370 ms
#   P > cores: --oversubscribe --mca mpi_yield_when_idle 1
#                                    allow more ranks than cores, and let a rank that waits
#                                    in MPI yield its core instead of spinning on it
# Environment: MPIRUN (default mpirun), MPIRUN_ARGS (extra mpirun arguments, split on spaces).
# Exit status: that of mpirun (the first failing rank's status), 2 on a usage error.
set -euo pipefail

bind=() dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bind-to-none) bind=(--bind-to none); shift ;;
    --dry-run) dry=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "mpirun.sh: usage: scripts/mpirun.sh [--bind-to-none] P COMMAND [ARGS...]" >&2; exit 2; }
p=$1; shift
[[ $p =~ ^[1-9][0-9]*$ ]] || { echo "mpirun.sh: P must be a positive integer, got '$p'" >&2; exit 2; }
mpirun=${MPIRUN:-mpirun}
command -v "$mpirun" >/dev/null || { echo "mpirun.sh: $mpirun not found (apt-get install openmpi-bin)" >&2; exit 2; }

cores=$(nproc 2>/dev/null || echo 1)
args=(--mca pml ob1 -np "$p")
[ "$p" -le "$cores" ] || args+=(--oversubscribe --mca mpi_yield_when_idle 1)
args+=("${bind[@]}")
read -r -a extra <<<"${MPIRUN_ARGS:-}"
args+=("${extra[@]}")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ $dry = 1 ]; then echo "$mpirun ${args[*]} $*"; exit 0; fi
exec "$mpirun" "${args[@]}" "$@"
