#!/usr/bin/env bash
# shellcheck disable=SC2317  # (whole file) the step functions are called indirectly
# run_all.sh — set up, build, run every partrain experiment, draw the figures and write
# the report. A rerun after an interruption continues where it stopped.
#
# Usage: ./run_all.sh [--quick | --smoke] [--only LIST] [--steps LIST] [--results DIR]
#                     [--fresh] [--with-torch] [--no-setup] [--list-steps] [--plan]
#                     [--cores N] [--hostfile FILE] [--threads-list L] [--ranks-list L] [--grid L]
#   (no mode)       the full sweep -> results/, figures in plots/ (40-50 minutes on 2 cores)
#   --quick         a few minutes: subsets, fewer epochs and points -> results/quick/
#   --smoke         every step in seconds on 1,000 MNIST digits, the threads list whole,
#                   ranks and P x T capped as --quick -> results/smoke/ (1-3 min on 2 cores)
#   --only LIST     only these groups (comma-separated): serial openmp mpi hybrid cuda cnn
#                   imagesize model tta trace; the plots and report steps always run
#   --steps LIST    only these steps (ids as --list-steps prints them) of the --only groups
#   --results DIR   where the CSVs, logs, skipped.txt and REPORT.md go; a relative DIR is
#                   taken from the directory run_all.sh is called from (as is --hostfile);
#                   a full run's figures go to DIR/plots/ (results/reference: self-contained)
#   --fresh         forget the finished steps (DIR/.done) and redo every step
#   --with-torch    install python3-torch as root when missing (else print the apt-get line)
#   --no-setup      skip the set-up (scripts/setup.sh run, data, make all)
#   --list-steps    print the step ids of the --only groups, one per line, and exit
#   --plan          print every step line with its lists and estimate, and exit
#   --cores N       C = N (at most 256, the trainers' --threads maximum): the lists and
#                   the report's words change; oversubscription follows the real nproc
#   --hostfile FILE OpenMPI hostfile: R = the sum of its slots
#   --threads-list L, --ranks-list L, --grid L   replace a derived list (1,2,8; 1x8,2x4)
# The lists come from the cores (scripts/lib.sh; docs/sweeps.md, which also describes
# every step, its outputs, the resume, the lock and the interruptions).
# Exit status: 0 when every step that ran succeeded or was skipped, 1 when one failed,
# 2 on a usage error (or an unusable or busy DIR), 130 (143, 129, 131) on SIGINT (SIGTERM,
# SIGHUP, SIGQUIT). Test hook: PARTRAIN_EXTRA_STEPS=FILE sources FILE's steps (tests/).
set -uo pipefail
export LC_ALL=C      # numbers in every script and tool it runs: 0.5, never 0,5
CALLER_DIR=$PWD
cd "$(dirname "${BASH_SOURCE[0]}")" || exit 2

. scripts/lib.sh                  # PARTRAIN_PYTHON (the one place it is chosen), LOCK, the sweeps
PY=$PARTRAIN_PYTHON
ALL_GROUPS=(serial openmp mpi hybrid cuda cnn imagesize model tta trace)
mode=full only="" results="" fresh=0 with_torch=0 setup=1 list_steps=0 plan=0 steps_only=""
REAL_CORES=$(nproc)   # what runs oversubscribed is decided by this, never by --cores

usage() { sed -n '3,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "run_all: $*" >&2; exit 2; }
from_caller() { case $1 in /*) echo "$1" ;; *) echo "$CALLER_DIR/$1" ;; esac; }
while [ $# -gt 0 ]; do
  case "$1" in
    --quick|--smoke) [ $mode = full ] || [ $mode = "${1#--}" ] || die "--quick and --smoke exclude each other"
                     mode=${1#--}; shift ;;
    --only) [ $# -ge 2 ] || die "--only needs a list"; only=$2; shift 2 ;;
    --results) [ $# -ge 2 ] && [ -n "$2" ] || die "--results needs a directory"; results=$(from_caller "$2"); shift 2 ;;
    --fresh) fresh=1; shift ;;
    --with-torch) with_torch=1; shift ;;
    --no-setup) setup=0; shift ;;
    --list-steps) list_steps=1; shift ;;
    --plan) plan=1; shift ;;
    --steps) [ $# -ge 2 ] && [[ $2 =~ ^[a-z0-9-]+(,[a-z0-9-]+)*$ ]] || die "--steps needs a list of step ids (see --list-steps)"
             steps_only=$2; shift 2 ;;
    --hostfile) [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"; sweep_option "$1" "$(from_caller "$2")"; shift 2 ;;
    --cores|--threads-list|--ranks-list|--grid)
      [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"; sweep_option "$1" "$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -z "${PARTRAIN_HOSTFILE:-}" ] || PARTRAIN_HOSTFILE=$(from_caller "$PARTRAIN_HOSTFILE")
# shellcheck source=/dev/null
[ -z "${PARTRAIN_EXTRA_STEPS:-}" ] || . "$(from_caller "$PARTRAIN_EXTRA_STEPS")" || die "cannot read PARTRAIN_EXTRA_STEPS"
[ -n "$results" ] || results=$(case $mode in full) echo results ;; *) echo "results/$mode" ;; esac)
sweep_setup $mode   # C, R, the nodes and the lists (scripts/lib.sh); a bad hostfile exits 2 here
C=$SWEEP_CORES
results=${results%/}
# figures: the default full run's in plots/; any other full run's in DIR/plots/, so that a
# results directory (results/reference) is self-contained; quick and smoke keep them in DIR
if [ $mode != full ]; then plotdir=$results; elif [ "$results" = results ]; then plotdir=plots; else plotdir=$results/plots; fi

selected=()
if [ -z "$only" ]; then selected=("${ALL_GROUPS[@]}"); else IFS=, read -r -a selected <<<"$only"; fi
for p in "${selected[@]}"; do
  [[ " ${ALL_GROUPS[*]} " == *" $p "* ]] || die "--only: unknown group '$p' (${ALL_GROUPS[*]})"
done
if [ -n "$steps_only" ]; then   # every id one of the --only groups' steps, before any work
  known=" $(./run_all.sh --list-steps ${only:+--only "$only"} | tr '\n' ' ') "
  for id in ${steps_only//,/ }; do
    [[ $known == *" $id "* ]] || die "--steps: '$id' is not a step of ${only:-the run} (see --list-steps)"
  done
fi

RESULTS=$results   # the results directory (a step itself sees $results: its staging directory)
donedir=$results/.done skipdir=$results/.skip logdir=$results/logs partdir=$results/.partial
lockfile=$results/.lock
# ---------------------------------------------------------------- the results lock
# fd 7 holds an exclusive flock on DIR/.lock for run_all's whole life (its pid written
# there); only run_all's own process holds fd 7 (the steps and the watcher close it), so
# the lock goes when run_all goes, however it ends (SIGKILL too).
[ $plan = 0 ] || list_steps=2   # --plan: nothing is created or run (2: the steps are shown, not listed)
if [ $list_steps = 0 ]; then
  err=$(mkdir -p -- "$results" 2>&1) || die "cannot create the results directory $results: ${err##*: }"
  { exec 7>>"$lockfile"; } 2>/dev/null ||
    die "cannot write in the results directory $results ($(touch "$lockfile" 2>&1 | sed 's/.*: //'))"
  if command -v flock >/dev/null; then
    flock -n 7 || die "$results is in use by another run_all.sh (pid $(head -c 20 "$lockfile" 2>/dev/null | tr -cd 0-9))"
  fi
  echo $$ >"$lockfile"
  [ $fresh = 0 ] || rm -rf "$donedir" "$skipdir"
  rm -rf "$partdir"   # the staging directories of steps that never completed
  err=$(mkdir -p "$logdir" "$donedir" "$skipdir" "$partdir" "$plotdir" 2>&1) ||
    die "cannot create the directories of $results: $(head -n 1 <<<"$err")"
  # the cores and nodes this run's sweeps assumed, for the report's and figures' words
  jl() { local a; read -r -a a <<<"$1"; local IFS=,; echo "[${a[*]}]"; }
  jg() { sed 's/\([0-9]*\)x\([0-9]*\)/[\1,\2]/g; s/ /,/g; s/^/[/; s/$/]/' <<<"$1"; }
  LC_ALL=C printf '{"cores": %d, "nodes": %d, "slots": %d, "cores_from": "%s", "real_cores": %d, "mode": "%s",\n "threads": %s, "ranks": %s, "grid": %s, "pairs": %s}\n' \
    "$C" "$SWEEP_NODES" "$SWEEP_SLOTS" "$SWEEP_SOURCE" "$REAL_CORES" "$mode" "$(jl "$SWEEP_THREADS")" \
    "$(jl "$SWEEP_RANKS")" "$(jg "$SWEEP_GRID")" "$(jg "$SWEEP_PAIRS")" >"$results/machine.json.tmp" ||
    die "cannot write $results/machine.json"
  # what the machine is (CPU, flags, caches, compiler, MPI, PyTorch, commit, core-to-core
  # latency), so that the report describes the machine this run had; every probe has a
  # timeout; a resumed run (steps done) keeps what its start recorded
  keep=(); [ -z "$(ls -A "$donedir")" ] || keep=(--keep-from "$results/machine.json")
  "$PY" scripts/machine-info.py "$results/machine.json.tmp" "${keep[@]}" ||
    echo "run_all: note: $results/machine.json has the sweep's cores only (scripts/machine-info.py failed)" >&2
  mv -f "$results/machine.json.tmp" "$results/machine.json" || die "cannot write $results/machine.json"
fi
failed=0 t_all=$SECONDS
k=0 n=0 cur_pid="" cur_step=setup

# by_mode FULL QUICK SMOKE: the word for this run's mode
by_mode() { case $mode in full) echo "$1" ;; quick) echo "$2" ;; smoke) echo "$3" ;; esac; }
# most steps' data: Fashion-MNIST, or the raw MNIST digits (no gunzip) for the smoke run
DATA=$(by_mode data/fashion data/fashion data/mnist)

# ---------------------------------------------------------------- interruption
# The running step is a background job of its own process group (set -m below): every
# way out of run_all ends that whole group. A trapped signal (INT, TERM, HUP, QUIT) or an
# exit on any other path (EXIT trap) stops it here; SIGKILL of run_all cannot be trapped,
# so a watcher outside the step's group waits for the results lock that only run_all
# holds, and stops the step's group (TERM, KILL 3 s later) when the kernel releases it.
watch_pid=""
start_watcher() {   # PGID
  ( trap '' HUP INT TERM QUIT
    exec 7>&- </dev/null >/dev/null 2>&1
    if command -v flock >/dev/null && exec 6>>"$lockfile"; then
      flock 6
    else   # no flock: poll for run_all's death instead
      while kill -0 "$RUNALL_PID"; do sleep 1; done
    fi
    kill -TERM -- "-$1" || exit 0
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- "-$1" || exit 0; sleep 0.3; done
    kill -KILL -- "-$1"
  ) &
  watch_pid=$!
}
stop_watcher() {
  [ -n "$watch_pid" ] || return 0
  kill -KILL -- "-$watch_pid" 2>/dev/null || kill -KILL "$watch_pid" 2>/dev/null
  wait "$watch_pid" 2>/dev/null
  watch_pid=""
}
RUNALL_PID=$$
stop_step() {   # ends the running step's whole process group (TERM, then KILL after 3 s)
  if [ -n "$cur_pid" ]; then
    exec 3>&2 2>/dev/null     # no "[1]+ Terminated" job notice from bash
    kill -TERM -- "-$cur_pid"
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do kill -0 -- "-$cur_pid" 2>/dev/null || break; sleep 0.3; done
    kill -KILL -- "-$cur_pid" 2>/dev/null
    wait "$cur_pid"
    exec 2>&3 3>&-
    cur_pid=""
  fi
  stop_watcher
}
on_signal() {   # SIG STATUS
  trap '' INT TERM HUP QUIT
  echo
  stop_step
  rm -rf "$partdir"   # the interrupted step's partial outputs
  [ "$n" -gt 0 ] && assemble_skipped
  if [ "$k" -gt 0 ]; then
    echo "run_all: $1: interrupted at step $k/$n (${step_id[k-1]}); rerun to continue" >&2
  else
    echo "run_all: $1: interrupted during the set-up; rerun to continue" >&2
  fi
  exit "$2"
}
trap 'on_signal SIGINT 130' INT
trap 'on_signal SIGTERM 143' TERM
trap 'on_signal SIGHUP 129' HUP
trap 'on_signal SIGQUIT 131' QUIT
trap 'stop_step' EXIT

# ---------------------------------------------------------------- skipped.txt
# skip_note STEP REASON: a line for DIR/skipped.txt, kept with the running step (a step
# that runs again replaces its lines) and shown
skip_note() {
  printf '%s\t%s\n' "$1" "$2" >>"$skipdir/$cur_step"
  echo "    skipped: $2"
}
# group_skip GROUP REASON: a whole group is not run (registration time)
group_skip() {
  [ $plan = 1 ] || printf '%s\t%s\n' "$1" "$2" >>"$skipdir/group-$1"
  echo "[skip] $1: $2"
}
# DIR/skipped.txt from the per-step files: groups, then the steps in order, then others
assemble_skipped() {
  local f id seen=" " txt=$results/skipped.txt
  {
    for f in "$skipdir"/group-*; do [ -f "$f" ] && cat "$f" && seen+="$(basename "$f") "; done
    for id in "${step_id[@]}"; do [ -f "$skipdir/$id" ] && cat "$skipdir/$id" && seen+="$id "; done
    for f in "$skipdir"/*; do
      if [ -f "$f" ] && [[ "$seen" != *" $(basename "$f") "* ]]; then cat "$f"; fi
    done
    true
  } >"$txt.tmp" 2>/dev/null && mv -f "$txt.tmp" "$txt"
}

. scripts/run_all-steps.sh    # the step functions below, the set-up, group_usable
[ $list_steps != 0 ] || do_setup 7>&-   # its children (make, apt-get) do not hold the results lock

# ---------------------------------------------------------------- the steps
# step ID "FULL QUICK SMOKE" OUTPUTS FUNCTION DESCRIPTION: one row. The estimate is in
# seconds per mode (quick and smoke as measured on 2 cores; a sweep's scaled by its lists,
# est_lists). OUTPUTS (space-separated, relative to DIR) are the files the step owns:
# deleted before it runs, staged in DIR/.partial/ID, renamed into DIR when it returns.
step_id=() step_fn=() step_desc=() step_out=()
declare -A EST=()
step() {
  [ -z "$steps_only" ] || [ "$1" = plots ] || [ "$1" = report ] || [[ ",$steps_only," == *",$1,"* ]] ||
    [ $list_steps = 1 ] || return 0
  step_id+=("$1"); EST[$1]=$2; step_out+=("$3"); step_fn+=("$4"); step_desc+=("$5")
}
# group G: G was selected and, unless only the ids are listed, this machine can run it
# (else a group_skip line says why)
group() {
  [[ " ${selected[*]} " == *" $1 "* ]] || return 1
  [ $list_steps = 1 ] && return 0
  [ $plan = 1 ] || rm -f "$skipdir/group-$1"
  group_usable "$1"
}
Q=$(by_mode '' ', quick subset' ', 1k MNIST digits')
if group serial; then
  step serial-curves "15 2 1" runs.csv serial_curves "serial: loss/accuracy curves, MNIST digits + Fashion-MNIST ($(by_mode '10 epochs' '3 epochs, Fashion 10k' '1k samples each, 2 epochs')) -> $results/runs.csv"
  step hyperfine-serial "35 9 1" hyperfine-serial.json serial_hyperfine "$(hf_desc serial "one pinned core: $(variant_flags_desc serial/serial)")"
  step serial-vs-torch "70 15 6" bench-serial.csv serial_vs_torch "serial vs PyTorch on one core (bench/serial-vs-torch.sh$(by_mode '' ' --quick' ', 1k MNIST digits, 2 epochs, 1 run')) -> $results/bench-serial.csv"
fi
if group openmp; then
  step openmp-bench "600 46 9" "bench-openmp.csv bench-openmp-bounds.csv" openmp_bench "openmp: every --accum mode x T = $(words "$ONE_C") vs serial and PyTorch, batch 64$(by_mode ' and 512' ' and 512, quick subset' ', 1k MNIST digits, 1 run') (bench/openmp-bench.sh) -> $results/bench-openmp.csv"
  step openmp-sweep "250 20 2" "openmp.csv openmp-bounds.csv" openmp_sweep "openmp: thread sweep T = $(words "$SWEEP_THREADS") per mode ($C cores), batch 64, OMP_WAIT_POLICY=passive above the $REAL_CORES real cores$Q -> $results/openmp.csv"
  step hyperfine-openmp "15 4 1" hyperfine-openmp.json openmp_hyperfine "$(hf_desc openmp "openmp/openmp --threads $C --accum loop, OMP_WAIT_POLICY $([ "$C" -le "$REAL_CORES" ] && echo 'as in the environment' || echo passive)")"
fi
if group mpi; then
  step mpi-bench "200 22 3" "bench-mpi.csv bench-mpi-bounds.csv" mpi_bench "mpi: data parallel vs serial, P = $(words "$ONE_C"), every --sync, batch 64$(by_mode ' and 512' ' and 512, quick subset' ', 1k MNIST digits, 1 run') (bench/mpi-bench.sh) -> $results/bench-mpi.csv"
  step mpi-sweep "200 53 6" "mpi-strong.csv mpi-weak.csv mpi-pipeline.csv" mpi_sweep "mpi: strong/weak scaling P = $(words "$SWEEP_RANKS"), every --sync, and the pipeline's bubble (bench/mpi-sweep.sh$(by_mode '' ' --quick' ', 1k MNIST digits')) -> $results/mpi-{strong,weak,pipeline}.csv"
  step hyperfine-mpi "20 11 1" hyperfine-mpi.json mpi_hyperfine "$(hf_desc mpi "scripts/mpirun.sh $C mpi/mpi --sync allreduce")"
fi
if group hybrid; then
  step hybrid-bench "100 15 1" "bench-hybrid.csv bench-hybrid-bounds.csv" hybrid_bench "hybrid vs serial, P x T = $SWEEP_PAIRS, batch 64$(by_mode ' and 512' ' and 512' '') (bench/hybrid-bench.sh$Q) -> $results/bench-hybrid.csv"
  step hybrid-grid "60 26 3" "hybrid-grid.csv hybrid-grid.dat hybrid-table4.md" hybrid_grid "hybrid: P x T = $SWEEP_GRID ($C cores), batch $(by_mode 512 512 100) (bench/hybrid-grid.sh$Q) -> $results/hybrid-grid.csv, $results/hybrid-table4.md"
  step hyperfine-hybrid "45 20 1" hyperfine-hybrid.json hybrid_hyperfine "$(hf_desc hybrid "hybrid/hybrid 1 rank x $C threads and $C ranks x 1 thread")"
fi
if group cuda; then
  step cuda "30 10 3" cuda.csv cuda_kernels "cuda: --kernel $(cuda_kernels_desc) and serial, batch 64, $(by_mode '60k Fashion-MNIST, 4 epochs' '10k Fashion-MNIST, 3 epochs' '1k MNIST digits, 2 epochs') -> $results/cuda.csv"
  step hyperfine-cuda "15 5 2" hyperfine-cuda.json cuda_hyperfine "$(hf_desc cuda "$CUDA_BIN --kernel tiled")"
fi
if group cnn; then
  step cnn-accuracy "20 1 1" cnn-accuracy.csv cnn_accuracy "cnn: seed report 003's convergence runs, MNIST digits, lr 0.01: 1x1, 2x2 (global batch 32), 2 and 4 ranks x 32 per rank$(by_mode '' ', quick subset' ', 1k samples, 2 epochs') -> $results/cnn-accuracy.csv"
  step cnn-timing "45 7 1" cnn-timing.csv cnn_timing "cnn: $(by_mode '5 epochs of 60k Fashion-MNIST images' '2 epochs of 10k Fashion-MNIST images' '2 epochs of 1k MNIST digits'), P x T = $SWEEP_PAIRS -> $results/cnn-timing.csv"
  step cnn-tables "1 1 1" "cnn-table3.md cnn-table4.md cnn-table5.md cnn-speedup.dat" cnn_tables "cnn: seed report 003's Tables 3, 4, 5 -> $results/cnn-table{3,4,5}.md (figure: plots step)"
  step cnn-bench "170 30 10" "bench-cnn.csv bench-cnn-bounds.csv" cnn_bench "cnn vs PyTorch, $SWEEP_PAIRS and torch $(words "$ONE_C") threads (bench/cnn-bench.sh$(by_mode '' ' --quick' ', 1k MNIST digits, 1 run')) -> $results/bench-cnn.csv"
  step hyperfine-cnn "40 11 1" hyperfine-cnn.json cnn_hyperfine "$(hf_desc cnn "cnn/cnn 1 rank x 1 thread and $C ranks x 1 thread, batch 32")"
fi
if group imagesize; then
  step imagesize "90 28 5" imagesize.csv imagesize_sweep "imagesize: seed report 002's duration vs image size, --image-size 28, 57, 112 (784, 3249, 12544 inputs), $(by_mode '10k Fashion-MNIST, 3 epochs' '4k Fashion-MNIST, 2 epochs' '1k MNIST digits, 2 epochs'): serial (1 core), openmp T = $C, mpi P = $C allreduce -> $results/imagesize.csv"
fi
if group model; then
  step model "420 120 15" "comm.csv model-runs.csv comm-shm.dat comm-tcp-1gbit.dat comm-tcp-10gbit.dat comm-tcp-25gbit.dat" model_data "model: bench/comm (allreduce, reduce-bcast, hierarchical, iallreduce, barrier) at P = 2 .. $(words "$SWEEP_RANKS" | awk '{print $NF}'), the trainer runs of the alpha-beta model (bench/model-runs.sh), and, as root with Slurm, N simulated hosts (N = the cores, 2 to 4) at 1/10/25 Gbit, trainers at 1 and 10 (bench/cluster-bench.sh) -> $results/comm.csv, $results/model-runs.csv"
fi
if group tta; then   # after the benches: the strategy is the fastest in their CSVs
  step tta "560 60 12" "tta.csv tta-best.txt tta-diverged.txt" tta_sweep "tta: time to $(by_mode '84 %' '80 %' '60 %') test accuracy vs global batch $(by_mode '32 .. 4096, 3 seeds' '32, 256, 4096, 1 seed, 10k Fashion' '32, 512, 1 seed'), serial and the best strategy at C = $C (bench/tta-sweep.sh$(by_mode '' ' --quick' ' --smoke')) -> $results/tta.csv"
fi
if group trace; then
  step timelines "45 25 20" "trace-summary.csv $(trace_outputs)" trace_timelines "trace: one run per strategy with --trace (the first 50 steps), batch 64, $(by_mode '60k Fashion-MNIST' '10k Fashion-MNIST' '1k MNIST digits'), 1 epoch: $(trace_runs_desc) -> $results/traces/*.json, $results/trace-summary.csv (figures: plots step)"
fi
! declare -F extra_steps >/dev/null || extra_steps   # PARTRAIN_EXTRA_STEPS's rows (a test hook)
step plots "5 2 1" "" plots_step "plots: every figure from the CSVs in $results/ (scripts/plot.sh, as make plots) -> $plotdir/*.png"
step report "2 2 2" "" report_step "report: scripts/report.py -> $results/REPORT.md"
if [ $list_steps = 1 ]; then printf '%s\n' "${step_id[@]}"; exit 0; fi

# ---------------------------------------------------------------- estimates
# A sweep step's estimate scales with its lists: EST x cost(this run's list on the real
# cores) / cost(the list it was measured with on 2 cores), a point costing 1 when its
# workers (T, P, or P*T) fit the cores and 3 when they do not (this errs long).
list_cost() {   # CORES LIST
  local x w cost=0
  for x in $2; do
    if [[ $x == *x* ]]; then w=$(( ${x%x*} * ${x#*x} )); else w=$x; fi
    if [ "$w" -le "$1" ]; then cost=$((cost + 1)); else cost=$((cost + 3)); fi
  done
  echo $cost
}
est_of() {
  local e=${EST[$1]:-"10 5 2"} l t
  read -r -a e <<<"$e"; t=$(by_mode "${e[0]}" "${e[1]}" "${e[2]}")
  l=$(est_lists "$1")
  [ -z "$l" ] || t=$(( (t * $(list_cost "$REAL_CORES" "${l#*|}") + $(list_cost 2 "${l%%|*}") - 1) / $(list_cost 2 "${l%%|*}") ))
  echo "$t"
}
fmt_dur() { local s=$1; if [ "$s" -lt 60 ]; then echo "${s} s"; elif [ "$s" -lt 3600 ]; then printf '%d min %02d s\n' $((s / 60)) $((s % 60)); else printf '%d h %02d min\n' $((s / 3600)) $((s % 3600 / 60)); fi; }
n=${#step_id[@]}
stamp_sig() { echo "$mode | ${step_desc[$1]}"; }
is_done() { [ -f "$donedir/${step_id[$1]}" ] && [ "$(head -n 1 "$donedir/${step_id[$1]}")" = "$(stamp_sig "$1")" ]; }
# the estimated time left from step index $1 on: the remaining steps' estimates, scaled by
# how long the finished steps of this invocation took against their estimates
est_done=0 took_done=0
time_left() {
  local i left=0
  for ((i = $1; i < n; i++)); do is_done $i || left=$((left + $(est_of "${step_id[i]}"))); done
  if [ $est_done -ge 5 ]; then
    local f=$((100 * took_done / est_done))
    [ $f -lt 30 ] && f=30; [ $f -gt 300 ] && f=300
    left=$((left * f / 100))
  fi
  fmt_dur "$left"
}
if [ $plan = 1 ]; then   # the step lines, with the estimate of what is left before each
  for ((k = 1; k <= n; k++)); do
    if is_done $((k - 1)); then echo "[$k/$n] ${step_desc[k-1]} (done earlier: skipped)"
    else echo "[$k/$n] ${step_desc[k-1]}  [~$(time_left $((k - 1))) left, estimated]"; fi
  done
  echo "run_all: plan only: $mode run of ${selected[*]}, $C cores, nothing run or written; about $(time_left 0) estimated"
  exit 0
fi

# ---------------------------------------------------------------- run
# A step that finished writes DIR/.done/ID (its mode and description, the date); a rerun
# with the same mode and DIR skips it. A step's outputs are deleted before it runs and
# staged in DIR/.partial/ID until it returns; it runs in its own process group.
assemble_skipped
set -m
for ((k = 1; k <= n; k++)); do
  i=$((k - 1)) id=${step_id[k-1]}
  if is_done $i; then
    echo "[$k/$n] ${step_desc[i]} (done earlier, skipped; --fresh to redo)"
    continue
  fi
  echo "[$k/$n] ${step_desc[i]}  [~$(time_left $i) left, estimated]"
  had_out=0
  for f in ${step_out[i]}; do [ -e "$results/$f" ] && had_out=1; rm -f "${results:?}/$f"; done
  rm -f "$skipdir/$id" "$donedir/$id"
  log=$logdir/$id.log; : >"$log"
  cur_step=$id t0=$SECONDS
  stage=$partdir/$id
  rm -rf "$stage"; mkdir -p "$stage"
  ( set +m; exec 7>&-
    [ -z "${step_out[i]}" ] || results=$stage
    "${step_fn[i]}" ) </dev/null &
  cur_pid=$!
  start_watcher "$cur_pid"
  wait "$cur_pid"; rc=$?
  cur_pid=""
  stop_watcher
  for f in ${step_out[i]}; do
    [ ! -e "$stage/$f" ] || { mkdir -p "$(dirname "$results/$f")" && mv -f "$stage/$f" "$results/$f"; }
  done
  rm -rf "$stage"
  took=$((SECONDS - t0))
  est_done=$((est_done + $(est_of "$id"))) took_done=$((took_done + took))
  case $rc in
    0) printf '%s\n%s\nfinished in %d s\n' "$(stamp_sig $i)" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$took" >"$donedir/$id"
       note "done in $took s" ;;
    3) note "skipped after $took s (reason in $results/skipped.txt; a rerun tries again)" ;;
    *) note "FAILED after $took s (exit $rc; log: $log)"
       printf '%s\tfailed after %d s (exit %d; log: %s)\n' "$id" "$took" "$rc" "$log" >>"$skipdir/$id"
       failed=1 ;;
  esac
  # new (or removed) data: the figures and the report are redrawn; a step skipped again
  # for its reason (no tool, PyTorch or GPU) changed nothing
  if [ "$id" != plots ] && [ "$id" != report ] && { [ $rc != 3 ] || [ $had_out = 1 ]; }; then
    rm -f "$donedir/plots" "$donedir/report"
  fi
  assemble_skipped
done
set +m
echo "run_all: finished in $(fmt_dur $((SECONDS - t_all)))$([ $failed = 1 ] && echo '; some steps FAILED')." \
     "Skipped or failed: $(grep -c . "$results/skipped.txt" 2>/dev/null || echo 0) line(s) in $results/skipped.txt"
exit $failed
