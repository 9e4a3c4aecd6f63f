# scripts/slurm/lib.sh — what every scripts/slurm/*.sbatch does first (sourced).
#   slurm_start   checks that it runs in a Slurm job and cds to the repository root (Slurm
#                 runs a copy of the batch script, so its own path says nothing: the job runs
#                 in PARTRAIN_ROOT, else the directory sbatch was called from); prints the
#                 allocation
#   slurm_ranks   "1 2 4 ... T" up to the job's tasks T, and T itself: the default --ranks
# shellcheck shell=bash
slurm_start() {
  local root=${PARTRAIN_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}}
  [ -n "${SLURM_JOB_ID:-}" ] || { echo "$1: not inside a Slurm job: submit it with sbatch (see --help)" >&2; exit 2; }
  [ -f "$root/scripts/lib.sh" ] && [ -x "$root/scripts/mpirun.sh" ] ||
    { echo "$1: $root is not partrain's root: submit from there or set PARTRAIN_ROOT" >&2; exit 2; }
  cd "$root" || exit 2
  echo "$1: job $SLURM_JOB_ID, ${SLURM_JOB_NUM_NODES:-?} nodes (${SLURM_JOB_NODELIST:-?}), ${SLURM_NTASKS:-?} tasks, CPUs per node ${SLURM_JOB_CPUS_PER_NODE:-?}"
}
slurm_ranks() {
  local t=${SLURM_NTASKS:-1} p=1 out=""
  while [ $p -lt "$t" ]; do out="$out $p"; p=$((p * 2)); done
  echo "${out# } $t" | sed 's/^ //'
}
