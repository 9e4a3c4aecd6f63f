# scripts/slurm/lib.sh — what every scripts/slurm/*.sbatch does first (sourced).
#   slurm_start   checks that it runs in a Slurm job and cds to the repository root (Slurm
#                 runs a copy of the batch script, so its own path says nothing: the job runs
#                 in PARTRAIN_ROOT, else the directory sbatch was called from); the site hook:
#                 `module load $PARTRAIN_MODULES` when that is set (e.g. "openmpi/4.1 python/3"),
#                 then scripts/slurm/site.sh when present (the site's own lines, not committed);
#                 exports SRUN_CPUS_PER_TASK from SLURM_CPUS_PER_TASK (srun stopped inheriting
#                 sbatch's --cpus-per-task in Slurm 22.05) and LC_ALL=C; prints the allocation
#   slurm_ranks   "1 2 4 ... T" up to the job's tasks T, and T itself: the default --ranks
# shellcheck shell=bash
slurm_start() {
  local root=${PARTRAIN_ROOT:-${SLURM_SUBMIT_DIR:-$PWD}}
  [ -n "${SLURM_JOB_ID:-}" ] || { echo "$1: not inside a Slurm job: submit it with sbatch (see --help)" >&2; exit 2; }
  [ -f "$root/scripts/lib.sh" ] && [ -x "$root/scripts/mpirun.sh" ] ||
    { echo "$1: $root is not partrain's root: submit from there or set PARTRAIN_ROOT" >&2; exit 2; }
  cd "$root" || exit 2
  export LC_ALL=C
  if [ -n "${PARTRAIN_MODULES:-}" ]; then
    command -v module >/dev/null 2>&1 || { echo "$1: PARTRAIN_MODULES is set but this node has no 'module' command" >&2; exit 2; }
    # shellcheck disable=SC2086  # a list of modules
    module load $PARTRAIN_MODULES || { echo "$1: module load $PARTRAIN_MODULES failed" >&2; exit 2; }
  fi
  # shellcheck disable=SC1091
  [ ! -f scripts/slurm/site.sh ] || . scripts/slurm/site.sh
  [ -z "${SLURM_CPUS_PER_TASK:-}" ] || export SRUN_CPUS_PER_TASK=$SLURM_CPUS_PER_TASK
  echo "$1: job $SLURM_JOB_ID${SLURM_ARRAY_TASK_ID:+ (array task $SLURM_ARRAY_TASK_ID)}, ${SLURM_JOB_NUM_NODES:-?} nodes (${SLURM_JOB_NODELIST:-?}), ${SLURM_NTASKS:-?} tasks, CPUs per node ${SLURM_JOB_CPUS_PER_NODE:-?}, per task ${SLURM_CPUS_PER_TASK:-1}"
}
slurm_ranks() {
  local t=${SLURM_NTASKS:-1} p=1 out=""
  while [ $p -lt "$t" ]; do out="$out $p"; p=$((p * 2)); done
  echo "${out# } $t" | sed 's/^ //'
}
