#!/usr/bin/env bash
# shellcheck disable=SC2317  # (whole file) the step functions are called indirectly
# run_all.sh — set up, build, run every partrain experiment, draw the figures and write
# the report. A rerun after an interruption continues where it stopped.
#
# Usage: ./run_all.sh [--quick | --smoke] [--only LIST] [--results DIR] [--fresh]
#                     [--with-torch] [--no-setup] [--list-steps] [--cores N] [--hostfile FILE]
#                     [--threads-list L] [--ranks-list L] [--grid L] [--steps LIST] [--plan]
#   (no mode)       the full sweep: full-size data sets, every configuration, repeated
#                   runs -> results/, figures in plots/ (about 30-40 minutes on 2 cores;
#                   the step lines estimate it for this machine's lists)
#   --quick         a few minutes: training subsets, fewer epochs, configurations and
#                   repetitions, at most 4 thread and rank counts (1, the largest below C,
#                   C, 2C) and 6 P x T points -> results/quick/, figures there too
#   --smoke         every step in seconds: 1,000 MNIST digits (data/mnist), 1-2 epochs, one
#                   run, the threads list whole, ranks and P x T capped as --quick
#                   -> results/smoke/, figures there too (about 1-3 minutes on 2 cores;
#                   tests/test_run_all.sh runs it)
#   --only LIST     only these groups' steps (comma-separated): serial openmp mpi hybrid
#                   cuda cnn imagesize (default: all); the plots and report steps always run
#   --results DIR   where the CSVs, JSON, logs, skipped.txt and REPORT.md go
#   --fresh         forget the finished steps (DIR/.done) and redo every step
#   --with-torch    install python3-torch (apt-get) when running as root and it is missing;
#                   otherwise print the exact apt-get line and go on without it. Without
#                   this flag the PyTorch steps run when $PARTRAIN_PYTHON (scripts/lib.sh:
#                   /usr/bin/python3, Debian's) can import torch and are skipped (with a
#                   line in skipped.txt) when it cannot
#   --no-setup      skip the set-up below (packages, data, make all): for tests
#   --list-steps    print the id of every step the run would register (of the --only
#                   groups, whatever this machine has or lacks), one per line, in order,
#                   and exit without running or writing anything (scripts/report.py reads it)
#   --steps LIST    only these steps (ids as --list-steps prints them, comma-separated) of
#                   the --only groups; the plots and report steps always run
#   --plan          print every step line the run would show, with its lists and its
#                   estimate, and exit without running or writing anything
# The sweeps fit the machine (scripts/lib.sh derives the lists; docs/sweeps.md): C = the
# cores of one node (nproc; --cores N or PARTRAIN_CORES; SLURM_CPUS_ON_NODE under Slurm),
# R = the rank slots (SLURM_NTASKS under Slurm, the slots of --hostfile FILE or
# PARTRAIN_HOSTFILE, else C). Threads: powers of two below C, C and 2C (e.g. C = 64:
# 1 2 4 8 16 32 64 128); ranks: the same up to R; the hybrid grid: at most 12 P x T
# points with P*T <= 2C (1x1, 1xC, Cx1, the P*T = C points, the squarest P*T = 2C ones);
# the comparisons (openmp-bench, mpi-bench, hyperfine, imagesize) run 1 and C, hybrid-bench
# and cnn 1x1, the P*T = C points and the squarest P*T = 2C point.
#   --cores N       C = N: the lists and the words of the report change, not what runs
#                   oversubscribed (OMP_WAIT_POLICY=passive and mpirun --oversubscribe
#                   follow the real nproc), so a large N runs safely on a small machine
#   --hostfile FILE an OpenMPI hostfile ("host slots=N" lines): R = the sum of its slots
#   --threads-list L, --ranks-list L, --grid L   replace the thread sweep (openmp-sweep),
#                   the rank sweep (mpi-sweep) or the P x T points (hybrid-grid,
#                   hybrid-bench, cnn): e.g. 1,2,8 and 1x8,2x4,8x1; positive integers
# The cores and nodes a run assumed: DIR/machine.json (the report's and figures' words).
#
# Set-up: scripts/setup.sh run (missing Debian packages — gnuplot-nox, hyperfine, OpenMPI,
# ... — installed with apt-get when root, otherwise the exact apt-get line is printed),
# scripts/get-data.sh when data/ is incomplete, `make all` when a binary is missing or
# older than its sources.
#
# Steps, each announced as "[k/n] what -> outputs  [~T left, estimated]" (T: the sum of
# per-step estimates for this mode, each sweep step's scaled by its lists (est_of below;
# docs/sweeps.md), then by how long the finished steps took against theirs — an
# estimate, not a promise). Every timed run holds /tmp/partrain-bench.lock.
#   serial    serial-curves     loss/accuracy curves, MNIST digits and Fashion-MNIST -> runs.csv
#             hyperfine-serial  whole-process timing (hyperfine --warmup 1 --runs N):
#                               own kernel and --gemm blas -> hyperfine-serial.json
#             serial-vs-torch   serial vs PyTorch, one core (bench/serial-vs-torch.sh)
#                               -> bench-serial.csv                        [PyTorch]
#   (C: the cores, threads / ranks / grid / pairs: the lists above; on 2 cores C = 2,
#    threads and ranks 1 2 4, grid 1x1 1x2 1x4 2x1 2x2 4x1, pairs 1x1 1x2 2x1 2x2)
#   openmp    openmp-bench      every --accum mode x T = 1, C vs serial and
#                               PyTorch (bench/openmp-bench.sh) -> bench-openmp.csv
#             openmp-sweep      T = the threads list per mode, passive above the real
#                               cores -> openmp.csv (figure openmp-threads.png)
#             hyperfine-openmp  T = C -> hyperfine-openmp.json
#   mpi       mpi-bench         mpi/mpi P = 1, C, every --sync, vs serial (bench/mpi-bench.sh)
#                               -> bench-mpi.csv
#             mpi-sweep         strong/weak scaling P = the ranks list and the pipeline's
#                               bubble (bench/mpi-sweep.sh)
#                               -> mpi-{strong,weak,pipeline}.csv (mpi-scaling.png, mpi-comm.png)
#             hyperfine-mpi     P = C, allreduce -> hyperfine-mpi.json
#   hybrid    hybrid-bench      P x T = the pairs vs serial (bench/hybrid-bench.sh)
#                               -> bench-hybrid.csv
#             hybrid-grid       P x T = the grid (bench/hybrid-grid.sh) -> hybrid-grid.csv,
#                               hybrid-table4.md (seed report 001's Table 4; hybrid-grid.png)
#             hyperfine-hybrid  1xC and Cx1 -> hyperfine-hybrid.json
#   cnn       cnn-accuracy      seed report 003's convergence runs -> cnn-accuracy.csv
#             cnn-timing        5 epochs of 60k images, P x T = the pairs -> cnn-timing.csv
#             cnn-tables        its Tables 3, 4, 5 -> cnn-table{3,4,5}.md (cnn-speedup.png)
#             cnn-bench         cnn vs PyTorch (bench/cnn-bench.sh) -> bench-cnn.csv [PyTorch]
#             hyperfine-cnn     1x1 and Cx1 -> hyperfine-cnn.json
#   cuda      cuda              only when cuda/cuda is built AND a GPU works (else one line
#                               in skipped.txt with the reason: no nvcc, or the binary's own
#                               error); every kernel and serial -> cuda.csv; never fails the run
#             hyperfine-cuda    --kernel tiled -> hyperfine-cuda.json
#   imagesize imagesize         seed report 002's duration vs image size: --image-size 28,
#                               57, 112 (784, 3249, 12544 inputs), the same samples, serial
#                               (one pinned core), openmp T = C and mpi P = C allreduce
#                               -> imagesize.csv (imagesize.png)
#   (always)  plots             every figure from the CSVs alone: scripts/plot.sh, the code
#                               `make plots` runs -> PLOTDIR/*.png
#             report            scripts/report.py -> DIR/REPORT.md
# The hyperfine steps time whole processes (start-up, data loading and evaluation
# included) on one small workload, the same for every trainer, stated in their step line;
# the CSVs' epoch_seconds_median is the trainers' own per-epoch training time.
#
# Resume: a step that finished writes DIR/.done/STEP (its mode and description, the date);
# a rerun with the same mode and DIR skips it ("done earlier, skipped; --fresh to redo").
# Before a step runs, the outputs it owns are deleted, so a step that was interrupted or
# failed is redone from scratch: no duplicate or partial rows. A step writes its outputs
# into DIR/.partial/STEP; they are renamed into DIR when the step function returns, so an
# interrupted or killed step leaves nothing half-written in DIR. Ctrl-C (SIGINT), SIGTERM,
# SIGHUP or SIGQUIT stops the running step's whole process group and exits with status
# 130 (143, 129, 131) ("interrupted at step k; rerun to continue"); every other way out,
# SIGKILL of run_all.sh included, ends the step's process group too. One run_all.sh at a
# time per DIR (a lock on DIR/.lock): a second one exits 2 at once ("DIR is in use by
# another run_all.sh (pid N)"), as does a DIR that cannot be created or written. The
# plots and report steps run again whenever another step ran.
# Skipped and failed: DIR/skipped.txt, one "STEP<TAB>reason" line per step (or part of
# one) that was skipped or failed — missing tool, data, toolchain, GPU or PyTorch. Each
# step's full output: DIR/logs/STEP.log.
# Exit status: 0 when every step that ran succeeded or was skipped, 1 when one failed,
# 2 on a usage error (or an unusable or busy DIR), 130 (129, 131, 143) when interrupted.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")" || exit 2

. scripts/lib.sh                    # PARTRAIN_PYTHON (the one place it is chosen), LOCK, variant_table
PY=$PARTRAIN_PYTHON
ALL_GROUPS=(serial openmp mpi hybrid cuda cnn imagesize model)
[ -z "${PARTRAIN_TEST_FAKE_STEP:-}" ] || ALL_GROUPS+=(fake)   # a test hook (steps_fake)
mode=full only="" results="" fresh=0 with_torch=0 setup=1 list_steps=0 plan=0 steps_only=""
REAL_CORES=$(nproc)   # what runs oversubscribed is decided by this, never by --cores

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; /^# shellcheck/d; s/^# \{0,1\}//'; }
die() { echo "run_all: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --quick|--smoke) [ $mode = full ] || [ $mode = "${1#--}" ] || die "--quick and --smoke exclude each other"
                     mode=${1#--}; shift ;;
    --only) [ $# -ge 2 ] || die "--only needs a list"; only=$2; shift 2 ;;
    --results) [ $# -ge 2 ] && [ -n "$2" ] || die "--results needs a directory"; results=$2; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --with-torch) with_torch=1; shift ;;
    --no-setup) setup=0; shift ;;
    --list-steps) list_steps=1; shift ;;
    --plan) plan=1; shift ;;
    --steps) [ $# -ge 2 ] && [[ $2 =~ ^[a-z0-9-]+(,[a-z0-9-]+)*$ ]] || die "--steps needs a list of step ids (see --list-steps)"
             steps_only=$2; shift 2 ;;
    --cores|--hostfile|--threads-list|--ranks-list|--grid)
      [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"; sweep_option "$1" "$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$results" ] || results=$(case $mode in full) echo results ;; *) echo "results/$mode" ;; esac)
sweep_setup $mode   # C, R, the nodes and the lists (scripts/lib.sh); a bad hostfile exits 2 here
C=$SWEEP_CORES
# the options every sweeping bench script gets: the same C and lists as this run
SWEEP_ARGS=(--cores "$C")
results=${results%/}
if [ $mode = full ]; then plotdir=plots; else plotdir=$results; fi

selected=()
if [ -z "$only" ]; then
  selected=("${ALL_GROUPS[@]}")
else
  IFS=, read -r -a selected <<<"$only"
  for p in "${selected[@]}"; do
    [[ " ${ALL_GROUPS[*]} " == *" $p "* ]] || die "--only: unknown group '$p' (${ALL_GROUPS[*]})"
  done
fi
wants() { [[ " ${selected[*]} " == *" $1 "* ]]; }
if [ -n "$steps_only" ]; then   # every id one of the --only groups' steps, before any work
  known=" $("$0" --list-steps ${only:+--only "$only"} | tr '\n' ' ') "
  for id in ${steps_only//,/ }; do
    [[ $known == *" $id "* ]] || die "--steps: '$id' is not a step of ${only:-the run} (see --list-steps)"
  done
fi

RESULTS=$results   # the results directory (a step itself sees $results: its staging directory)
donedir=$results/.done skipdir=$results/.skip logdir=$results/logs partdir=$results/.partial
lockfile=$results/.lock
# ---------------------------------------------------------------- the results lock
# One run_all.sh per results directory: fd 7 holds an exclusive flock on DIR/.lock for
# run_all's whole life (its pid written there); a second run_all.sh on the same DIR exits
# 2 at once, writing nothing. Only run_all's own process holds fd 7 (the steps and the
# watcher close it), so the lock goes when run_all goes, however it ends (SIGKILL too).
[ $plan = 0 ] || list_steps=2   # --plan: nothing is created or run (2: the steps are shown, not listed)
if [ $list_steps = 0 ]; then
  if ! err=$(mkdir -p -- "$results" 2>&1); then
    die "cannot create the results directory $results: ${err##*: }"
  fi
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
  # (scripts/reporting/common.py, scripts/plot.sh; they fall back to this machine's)
  jl() { local a; read -r -a a <<<"$1"; local IFS=,; echo "[${a[*]}]"; }
  jg() { sed 's/\([0-9]*\)x\([0-9]*\)/[\1,\2]/g; s/ /,/g; s/^/[/; s/$/]/' <<<"$1"; }
  printf '{"cores": %d, "nodes": %d, "slots": %d, "cores_from": "%s", "real_cores": %d, "mode": "%s",\n "threads": %s, "ranks": %s, "grid": %s, "pairs": %s}\n' \
    "$C" "$SWEEP_NODES" "$SWEEP_SLOTS" "$SWEEP_SOURCE" "$REAL_CORES" "$mode" "$(jl "$SWEEP_THREADS")" \
    "$(jl "$SWEEP_RANKS")" "$(jg "$SWEEP_GRID")" "$(jg "$SWEEP_PAIRS")" >"$results/machine.json.tmp" &&
    mv -f "$results/machine.json.tmp" "$results/machine.json" || die "cannot write $results/machine.json"
fi
failed=0 t_all=$SECONDS
k=0 n=0 cur_pid="" cur_step=setup

# by_mode FULL QUICK SMOKE: the word for this run's mode
by_mode() { case $mode in full) echo "$1" ;; quick) echo "$2" ;; smoke) echo "$3" ;; esac; }
# the data set of most steps: Fashion-MNIST, or the MNIST digits (raw, so loading takes
# milliseconds instead of a second of gunzip) for the smoke run
DATA=$(by_mode data/fashion data/fashion data/mnist)

# ---------------------------------------------------------------- interruption
# The running step is a background job of its own process group (set -m below): every
# way out of run_all ends that whole group. A trapped signal (INT, TERM, HUP, QUIT) or an
# exit on any other path (EXIT trap) stops it here; SIGKILL of run_all cannot be trapped,
# so a watcher (start_watcher), a separate process outside the step's group, waits for
# the results lock that only run_all holds: the kernel releases it when run_all's process
# is gone, and the watcher then stops the step's group (TERM, KILL 3 s later) before it
# lets the lock go, so no step outlives run_all and a rerun cannot meet a stray step.
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

# ---------------------------------------------------------------- helpers
# one pinned core, one thread, OpenBLAS choosing its own kernels
PIN1=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
      MKL_NUM_THREADS=1 taskset -c 0)
LOCKED=(); command -v flock >/dev/null && LOCKED=(flock "$LOCK")

note() { echo "    $*"; }
# W workers (threads, or ranks x threads) on the real cores: OMP_WAIT_POLICY=passive above
# them (an env word, or nothing), and the CPUs a T-thread process is confined to
passive_env() { [ "$1" -le "$REAL_CORES" ] || echo OMP_WAIT_POLICY=passive; }
cpus_for() { local t=$1; [ "$t" -le "$REAL_CORES" ] || t=$REAL_CORES; echo "0-$((t - 1))"; }
ONE_C="1 $C"; [ "$C" != 1 ] || ONE_C=1   # the comparisons' thread or rank counts
log=/dev/null        # the running step's log file

# skip_note STEP REASON: a line for DIR/skipped.txt, kept with the running step (a step
# that runs again replaces its lines) and shown
skip_note() {
  printf '%s\t%s\n' "$1" "$2" >>"$skipdir/$cur_step"
  note "skipped: $2"
}
# group_skip GROUP REASON: a whole group is not run (registration time)
group_skip() {
  [ $plan = 1 ] || printf '%s\t%s\n' "$1" "$2" >>"$skipdir/group-$1"
  echo "[skip] $1: $2"
}
# DIR/skipped.txt from the per-step files: groups, then the steps in order, then others
assemble_skipped() {
  local f id seen=" " out=$results/skipped.txt
  {
    for f in "$skipdir"/group-*; do [ -f "$f" ] && cat "$f" && seen+="$(basename "$f") "; done
    for id in "${step_id[@]}"; do [ -f "$skipdir/$id" ] && cat "$skipdir/$id" && seen+="$id "; done
    for f in "$skipdir"/*; do
      if [ -f "$f" ] && [[ "$seen" != *" $(basename "$f") "* ]]; then cat "$f"; fi
    done
    true
  } >"$out.tmp" 2>/dev/null && mv -f "$out.tmp" "$out"
}

# run_logged CMD...: run CMD, its output appended to the step's log; shows the trainer's
# summary line, or the last lines of its output when it fails
run_logged() {
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  { echo "\$ $*"; printf '%s\n' "$out"; } >>"$log"
  if [ $rc = 0 ]; then
    printf '%s\n' "$out" | grep -E '^(serial|pytorch|openmp|mpi|hybrid|cuda|cnn): .*\| ' | tail -n 1 | cut -c1-160 | sed 's/^/    /'
  else
    printf '%s\n' "$out" | tail -n 4 | sed 's/^/    ! /'
    note "exit status $rc: $*"
  fi
  return $rc
}
# bench LINES-FILTER CMD...: a bench script with its output in the step's log; on success
# the part of the log that LINES-FILTER (a sed script) selects, after the script's "the
# machine is busy" line if it said so, else its last lines
bench() {
  local filter=$1 mark; shift
  echo "\$ $*" >>"$log"
  mark=$(wc -l <"$log")
  if "$@" >>"$log" 2>&1; then
    tail -n +$((mark + 1)) "$log" | grep -m 1 '^bench: the machine is busy' | sed 's/^/    /' || true
    sed -n "$filter" "$log" | cut -c1-170 | sed 's/^/    /'
  else
    tail -n 5 "$log" | sed 's/^/    ! /'
    return 1
  fi
}
have_data() { [ -d "$1" ] || { skip_note "$cur_step" "$1 missing (scripts/get-data.sh)"; return 1; }; }
have_torch() { "$PY" -c 'import torch' 2>/dev/null; }
torch_reason="$PY cannot import torch (./run_all.sh --with-torch installs python3-torch; or: apt-get install python3-torch)"

# ---------------------------------------------------------------- set-up
do_setup() {
  echo "run_all: $mode run of: ${selected[*]}; results in $results/, figures in $plotdir/"
  if [ $setup = 1 ]; then
    if [ -x scripts/setup.sh ]; then
      echo "[setup] packages and data (scripts/setup.sh run)"
      scripts/setup.sh run 2>&1 | sed 's/^/    /' ||
        echo "    setup incomplete (see above); steps whose tools or data are missing will be skipped"
    fi
    if [ ! -d data/fashion ] || [ ! -d data/mnist ]; then
      echo "[setup] data/ incomplete: scripts/get-data.sh"
      scripts/get-data.sh 2>&1 | sed 's/^/    /' || echo "    get-data failed; steps needing the missing data are skipped"
    fi
    need_build=0
    for p in "${selected[@]}"; do
      b=$p/$p
      if [ -f "$b.c" ] || [ -f "$b.cu" ]; then
        # missing, or older than its sources (make -q cannot tell: phony prerequisites)
        if [ ! -x "$b" ] || [ -n "$(find "$p" common Makefile -newer "$b" \
                                     \( -name '*.[ch]' -o -name '*.cu' -o -name Makefile \) 2>/dev/null | head -n 1)" ]; then
          need_build=1
        fi
      fi
    done
    if [ $need_build = 1 ]; then
      echo "[setup] binaries missing or older than their sources: make all"
      make all 2>&1 | tail -n 14 | sed 's/^/    /'
    fi
  else
    echo "[setup] skipped (--no-setup)"
  fi
  for tool in gnuplot hyperfine taskset flock; do
    command -v $tool >/dev/null ||
      echo "[setup] $tool missing: steps needing it are skipped (install: apt-get install $(
        case $tool in gnuplot) echo gnuplot-nox ;; taskset|flock) echo util-linux ;; *) echo $tool ;; esac))"
  done
  if [ $with_torch = 1 ] && ! have_torch; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "[setup] --with-torch: apt-get install python3-torch (log: /tmp/partrain-apt.log)"
      { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch; }; } >/tmp/partrain-apt.log 2>&1 ||
        echo "    apt-get install python3-torch failed (see /tmp/partrain-apt.log); going on without PyTorch"
    else
      echo "[setup] --with-torch: not root; install PyTorch with: sudo apt-get install python3-torch (going on without it)"
    fi
  fi
  if have_torch; then
    echo "[setup] PyTorch: $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) (the PyTorch steps run)"
  else
    echo "[setup] PyTorch: not importable by $PY: the PyTorch steps are skipped (--with-torch installs it)"
  fi
}
[ $list_steps != 0 ] || do_setup 7>&-   # its children (make, apt-get) do not hold the results lock

# ---------------------------------------------------------------- steps
# add_step ID FUNCTION DESCRIPTION OUTPUTS: OUTPUTS (space-separated, relative to DIR)
# are the files the step owns: deleted before it runs. A step function returns 0 (done:
# stamped), 3 (skipped: its skip_note says why; not stamped, retried by a rerun) or
# anything else (failed).
step_id=() step_fn=() step_desc=() step_out=()
add_step() {
  [ -z "$steps_only" ] || [ "$1" = plots ] || [ "$1" = report ] || [[ ",$steps_only," == *",$1,"* ]] ||
    [ $list_steps = 1 ] || return 0
  step_id+=("$1"); step_fn+=("$2"); step_desc+=("$3"); step_out+=("${4:-}")
}

# per-step time estimates in seconds, "full quick smoke": quick and smoke as measured on
# the 2-core development machine; full estimated from the runs each step makes (the full
# sweep was not timed step by step here)
declare -A EST=(
  [serial-curves]="15 2 1"         [hyperfine-serial]="35 9 1"    [serial-vs-torch]="70 15 6"
  [openmp-bench]="600 46 9"        [openmp-sweep]="250 20 2"      [hyperfine-openmp]="15 4 1"
  [mpi-bench]="200 22 3"           [mpi-sweep]="200 53 6"         [hyperfine-mpi]="20 11 1"
  [hybrid-bench]="100 15 1"        [hybrid-grid]="60 26 3"        [hyperfine-hybrid]="45 20 1"
  [cnn-accuracy]="20 1 1"          [cnn-timing]="45 7 1"          [cnn-tables]="1 1 1"
  [cnn-bench]="170 30 10"          [hyperfine-cnn]="40 11 1"      [cuda]="30 10 3"
  [hyperfine-cuda]="15 5 2"        [imagesize]="90 28 5"          [model]="420 120 15"
  [plots]="5 2 1"
  [report]="2 2 2"
)
# A sweep step's estimate scales with its lists. EST is the time of the lists it was
# measured with on 2 cores (the first half of est_lists); this run's estimate is
# EST x cost(this run's list on the real cores) / cost(that list on 2 cores), where a
# point costs 1 when its workers (T, P, or P*T) fit the cores and 3 when they do not
# (oversubscribed: time-sharing and, for ranks, start-up). A point is assumed to take as
# long on any core count (more cores do the same work faster, so this errs long).
est_lists() {   # ID: "BASE LIST|THIS RUN'S LIST" of a sweep step; nothing for the others
  case $1 in
    openmp-bench|mpi-bench) echo "1 2|$ONE_C" ;;
    openmp-sweep) echo "$(by_mode '1 2 4 8' '1 2 4 8' '1 2 4')|$SWEEP_THREADS" ;;
    mpi-sweep) echo "$(by_mode '1 2 4 8' '1 2 4' '1 2 4')|$SWEEP_RANKS" ;;
    hyperfine-openmp|hyperfine-mpi|imagesize) echo "2|$C" ;;
    hyperfine-hybrid) echo "1x2 2x1|1x$C ${C}x1" ;;
    hyperfine-cnn) echo "1x1 2x1|1x1 ${C}x1" ;;
    hybrid-bench|cnn-timing|cnn-bench) echo "1x1 1x2 2x1 2x2|$SWEEP_PAIRS" ;;
    hybrid-grid) echo "1x1 1x2 1x4 2x1 2x2 2x4 4x1 4x2 4x4|$SWEEP_GRID" ;;
  esac
}
list_cost() {   # CORES LIST: the list's cost (above)
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

# the small workload every hyperfine step times (whole processes)
case $mode in
  full)  HF_ARGS="--epochs 2" HF_RUNS=5 HF_WHAT="Fashion-MNIST 60k train / 10k test, 2 epochs" ;;
  quick) HF_ARGS="--train 10000 --test 2000 --epochs 2" HF_RUNS=3 HF_WHAT="Fashion-MNIST 10k train / 2k test, 2 epochs" ;;
  smoke) HF_ARGS="--train 1000 --test 500 --epochs 1" HF_RUNS=1 HF_WHAT="MNIST digits 1k train / 500 test, 1 epoch" ;;
esac
HF_ARGS="--data $DATA $HF_ARGS --quiet --csv none"
# hyperfine_step NAME LABEL COMMAND [LABEL COMMAND...]: -> DIR/hyperfine-NAME.json
hyperfine_step() {
  local name=$1; shift
  command -v hyperfine >/dev/null || { skip_note "$cur_step" "hyperfine missing (apt-get install hyperfine)"; return 3; }
  have_data "$DATA" || return 3
  local json=$results/hyperfine-$name.json cmds=()
  while [ $# -ge 2 ]; do cmds+=(-n "$1" "$2"); shift 2; done
  echo "\$ hyperfine ${cmds[*]}" >>"$log"
  # -N: no intermediate shell; the whole invocation holds the benchmark lock
  if "${LOCKED[@]}" hyperfine -N --style basic --warmup 1 --runs "$HF_RUNS" --export-json "$json.tmp" "${cmds[@]}" >>"$log" 2>&1 &&
     mv -f "$json.tmp" "$json"; then
    grep -E '^(Benchmark|  Time)' "$log" | sed 's/^ */    /'
    note "-> $json"
  else
    rm -f "$json.tmp"
    tail -n 5 "$log" | sed 's/^/    ! /'
    return 1
  fi
}
hf_desc() { echo "$1: whole-process timing, hyperfine --warmup 1 --runs $HF_RUNS, $HF_WHAT ($2) -> $results/hyperfine-$1.json"; }

# --- serial ---
serial_curves() {
  local csv=$results/runs.csv ok=0 m_args f_args
  read -r -a m_args <<<"$(by_mode "--epochs 10" "--epochs 3" "--train 1000 --test 500 --epochs 2")"
  read -r -a f_args <<<"$(by_mode "--epochs 10" "--train 10000 --epochs 3" "--train 1000 --test 500 --epochs 2")"
  have_data data/mnist && { run_logged "${PIN1[@]}" serial/serial --data data/mnist "${m_args[@]}" --csv "$csv" || ok=1; }
  have_data data/fashion && { run_logged "${PIN1[@]}" serial/serial --data data/fashion "${f_args[@]}" --csv "$csv" || ok=1; }
  [ -s "$csv" ] || { [ $ok = 0 ] && return 3; }
  return $ok
}
# variant_flags_desc PROG: the flags of PROG's variants, "--gemm own, --gemm blas"
variant_flags_desc() {
  local list
  list=$(variant_table "$1" 2>/dev/null) || { echo "every variant of $1"; return; }
  cut -f2 <<<"$list" | paste -sd, | sed 's/,/, /g'
}
serial_hyperfine() {   # every --gemm variant this build lists (blas only when built with OpenBLAS)
  local pin="${PIN1[*]}" cmds=() list name flags
  list=$(variant_table serial/serial) || return 1
  while IFS=$'\t' read -r name flags _; do cmds+=("serial-$name" "$pin serial/serial $flags $HF_ARGS"); done <<<"$list"
  hyperfine_step serial "${cmds[@]}"
}
serial_vs_torch() {
  have_torch || { skip_note "$cur_step" "$torch_reason"; return 3; }
  have_data "$DATA" || return 3
  local args
  read -r -a args <<<"$(by_mode "" "--quick" "--data data/mnist --train 1000 --epochs 2 --runs 1")"
  bench '/^median over/,$p' bench/serial-vs-torch.sh "${args[@]}" --csv "$results/bench-serial.csv"
}
steps_serial() {
  add_step serial-curves serial_curves "serial: loss/accuracy curves, MNIST digits + Fashion-MNIST ($(by_mode '10 epochs' '3 epochs, Fashion 10k' '1k samples each, 2 epochs')) -> $results/runs.csv" runs.csv
  add_step hyperfine-serial serial_hyperfine "$(hf_desc serial "one pinned core: $(variant_flags_desc serial/serial)")" hyperfine-serial.json
  add_step serial-vs-torch serial_vs_torch "serial vs PyTorch on one core (bench/serial-vs-torch.sh$(by_mode '' ' --quick' ', 1k MNIST digits, 2 epochs, 1 run')) -> $results/bench-serial.csv" bench-serial.csv
}

# --- openmp --- (bench/openmp-bench.sh confines a T-thread run to cores 0..T-1 with
# taskset, sets OMP_WAIT_POLICY=passive above the cores, runs everything under the
# benchmark lock and repeats a run that other load on the machine disturbed)
openmp_bench() {
  have_data "$DATA" || return 3
  local args
  read -r -a args <<<"$(by_mode "" "--quick" "--data data/mnist --train 1000 --epochs 2 --runs 1 --tries 1 --batches 64")"
  args+=(--cores "$C" --threads "$(commas "$ONE_C")")
  if ! have_torch; then
    args+=(--no-torch)
    skip_note "$cur_step" "PyTorch columns left out: $torch_reason"
  fi
  bench '/^epoch s: median/,$p' bench/openmp-bench.sh "${args[@]}" --csv "$results/bench-openmp.csv"
}
openmp_sweep() {
  have_data "$DATA" || return 3
  local args=(--batches 64 --no-torch)
  read -r -a more <<<"$(by_mode "--runs 2 --epochs 3" "--runs 2 --epochs 3 --quick" \
                                 "--data data/mnist --train 1000 --epochs 2 --runs 1 --tries 1")"
  bench '/^batch /,$p' bench/openmp-bench.sh "${args[@]}" "${more[@]}" --cores "$C" --threads "$(commas "$SWEEP_THREADS")" \
    --csv "$results/openmp.csv"
}
openmp_hyperfine() {
  hyperfine_step openmp "openmp-T$C" "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(passive_env "$C") taskset -c $(cpus_for "$C") openmp/openmp --threads $C --accum loop $HF_ARGS"
}
steps_openmp() {
  add_step openmp-bench openmp_bench "openmp: every --accum mode x T = $(words "$ONE_C") vs serial and PyTorch, batch 64$(by_mode ' and 512' ' and 512, quick subset' ', 1k MNIST digits, 1 run') (bench/openmp-bench.sh) -> $results/bench-openmp.csv" bench-openmp.csv
  add_step openmp-sweep openmp_sweep "openmp: thread sweep T = $(words "$SWEEP_THREADS") per mode ($C cores), batch 64, OMP_WAIT_POLICY=passive above the $REAL_CORES real cores$(by_mode '' ', quick subset' ', 1k MNIST digits') -> $results/openmp.csv" openmp.csv
  add_step hyperfine-openmp openmp_hyperfine "$(hf_desc openmp "openmp/openmp --threads $C --accum loop, OMP_WAIT_POLICY $([ "$C" -le "$REAL_CORES" ] && echo 'as in the environment' || echo passive)")" hyperfine-openmp.json
}

# --- mpi --- (ranks are launched by scripts/mpirun.sh and bound by mpirun, not taskset)
mpi_bench() {
  have_data "$DATA" || return 3
  local args
  read -r -a args <<<"$(by_mode "" "--quick" "--data data/mnist --train 1000 --epochs 2 --runs 1")"
  if [ $mode = smoke ]; then args+=(--batches 64); fi
  args+=(--cores "$C" --ranks-list "$(commas "$ONE_C")")
  bench '/^median over/,$p' bench/mpi-bench.sh "${args[@]}" --csv "$results/bench-mpi.csv"
}
mpi_sweep() {
  have_data "$DATA" || return 3
  [ -x mpi/pipeline ] || { note "mpi/pipeline not built: make all"; return 1; }
  local args
  read -r -a args <<<"$(by_mode "" "--quick" "--data data/mnist --train 1000 --batch 100 --per-rank 250 --per-rank-batch 25 --epochs 2 --stages 1_2 --microbatches 1_4")"
  args=("${args[@]//_/ }" --cores "$C" --ranks-list "$(commas "$SWEEP_RANKS")")     # "1_2" -> "1 2": one argument
  bench '/^strong/,$p' bench/mpi-sweep.sh "${args[@]}" --results "$results"
}
mpi_hyperfine() {
  hyperfine_step mpi "mpi-P$C-allreduce" "scripts/mpirun.sh $C mpi/mpi --sync allreduce $HF_ARGS"
}
steps_mpi() {
  add_step mpi-bench mpi_bench "mpi: data parallel vs serial, P = $(words "$ONE_C"), every --sync, batch 64$(by_mode ' and 512' ' and 512, quick subset' ', 1k MNIST digits, 1 run') (bench/mpi-bench.sh) -> $results/bench-mpi.csv" bench-mpi.csv
  add_step mpi-sweep mpi_sweep "mpi: strong/weak scaling P = $(words "$SWEEP_RANKS"), every --sync, and the pipeline's bubble (bench/mpi-sweep.sh$(by_mode '' ' --quick' ', 1k MNIST digits')) -> $results/mpi-{strong,weak,pipeline}.csv" "mpi-strong.csv mpi-weak.csv mpi-pipeline.csv"
  add_step hyperfine-mpi mpi_hyperfine "$(hf_desc mpi "scripts/mpirun.sh $C mpi/mpi --sync allreduce")" hyperfine-mpi.json
}

# --- hybrid --- (P ranks x T threads by scripts/mpirun.sh --bind-to-none; P*T above the
# cores with OMP_WAIT_POLICY=passive; every timed run under the benchmark lock)
hybrid_bench() {
  have_data "$DATA" || return 3
  local args
  read -r -a args <<<"$(by_mode "" "--runs 1 --epochs 2 --train 10000" "--data data/mnist --runs 1 --epochs 2 --train 1000 --batches 64")"
  bench '/^\$ \|^\[[0-9]*\/[0-9]*\] \|^bench: /!p' bench/hybrid-bench.sh "${args[@]}" --cores "$C" --grid "$(commas "$SWEEP_PAIRS")" \
    --csv "$results/bench-hybrid.csv"
}
hybrid_grid() {
  have_data "$DATA" || return 3
  local args
  read -r -a args <<<"$(by_mode "" "--epochs 2 --train 10000" "--data data/mnist --epochs 2 --train 1000 --batch 100")"
  bench '/^| Implementation/,$p' bench/hybrid-grid.sh "${args[@]}" --cores "$C" --grid "$(commas "$SWEEP_GRID")" --csv "$results/hybrid-grid.csv" --dat "$results/hybrid-grid.dat" \
    --plots none --table "$results/hybrid-table4.md"
}
hybrid_hyperfine() {
  hyperfine_step hybrid "hybrid-1x$C" "env $(passive_env "$C") scripts/mpirun.sh --bind-to-none 1 hybrid/hybrid --threads $C $HF_ARGS" \
                        "hybrid-${C}x1" "scripts/mpirun.sh $C hybrid/hybrid --threads 1 $HF_ARGS"
}
steps_hybrid() {
  local q; q=$(by_mode '' ', quick subset' ', 1k MNIST digits')
  add_step hybrid-bench hybrid_bench "hybrid vs serial, P x T = $SWEEP_PAIRS, batch 64$(by_mode ' and 512' ' and 512' '') (bench/hybrid-bench.sh$q) -> $results/bench-hybrid.csv" bench-hybrid.csv
  add_step hybrid-grid hybrid_grid "hybrid: P x T = $SWEEP_GRID ($C cores), batch $(by_mode 512 512 100) (bench/hybrid-grid.sh$q) -> $results/hybrid-grid.csv, $results/hybrid-table4.md" "hybrid-grid.csv hybrid-grid.dat hybrid-table4.md"
  add_step hyperfine-hybrid hybrid_hyperfine "$(hf_desc hybrid "hybrid/hybrid 1 rank x $C threads and $C ranks x 1 thread")" hyperfine-hybrid.json
}

# --- cnn --- (seed report 003's tables; ranks by scripts/mpirun.sh, threads per rank
# with --bind-to-none, and ranks x threads above the cores with OMP_WAIT_POLICY=passive and
# mpi_yield_when_idle; every timed run under the benchmark lock)
cnn_cmd=()
cnn_launch() {   # P T: sets cnn_cmd to the command line of cnn/cnn with P ranks x T threads
  local p=$1 t=$2 env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE) bind=()
  [ "$t" -gt 1 ] && bind=(--bind-to-none)
  # more workers than cores: threads sleep when they wait, and so do ranks waiting in MPI
  # (scripts/mpirun.sh itself adds mpi_yield_when_idle when the ranks alone exceed the cores)
  [ $((p * t)) -gt "$(nproc)" ] && env+=(OMP_WAIT_POLICY=passive)
  [ $((p * t)) -gt "$(nproc)" ] && [ "$p" -le "$(nproc)" ] && env+=("MPIRUN_ARGS=--mca mpi_yield_when_idle 1")
  cnn_cmd=("${LOCKED[@]}" "${env[@]}" scripts/mpirun.sh "${bind[@]}" "$p" cnn/cnn --threads "$t")
}
cnn_accuracy() {
  have_data data/mnist || return 3
  local csv=$results/cnn-accuracy.csv ok=0 more
  local args=(--data data/mnist --lr 0.01 --csv "$csv")
  read -r -a more <<<"$(by_mode "--epochs 5" "--epochs 5 --train 2000 --test 500" "--epochs 2 --train 1000 --test 500")"
  args+=("${more[@]}")
  cnn_launch 1 1; run_logged "${cnn_cmd[@]}" "${args[@]}" --batch 32 || ok=1
  cnn_launch 2 2; run_logged "${cnn_cmd[@]}" "${args[@]}" --batch 32 || ok=1
  cnn_launch 2 1; run_logged "${cnn_cmd[@]}" "${args[@]}" --batch-per-rank 32 || ok=1
  cnn_launch 4 1; run_logged "${cnn_cmd[@]}" "${args[@]}" --batch-per-rank 32 || ok=1
  return $ok
}
cnn_timing() {
  have_data "$DATA" || return 3
  local csv=$results/cnn-timing.csv ok=0 reps more
  local args=(--data "$DATA" --batch 32 --lr 0.01 --quiet --csv "$csv")
  read -r -a more <<<"$(by_mode "--epochs 5" "--train 10000 --epochs 2" "--train 1000 --test 500 --epochs 2")"
  args+=("${more[@]}"); reps=$(by_mode 2 1 1)
  for _ in $(seq 1 "$reps"); do
    for pt in $SWEEP_PAIRS; do
      cnn_launch "${pt%x*}" "${pt#*x}"; run_logged "${cnn_cmd[@]}" "${args[@]}" || ok=1
    done
  done
  return $ok
}
cnn_tables() {
  # the inputs: the other steps' outputs, in the results directory itself
  [ -s "$RESULTS/cnn-accuracy.csv" ] || [ -s "$RESULTS/cnn-timing.csv" ] ||
    { skip_note "$cur_step" "no cnn-accuracy.csv or cnn-timing.csv to make the tables from"; return 3; }
  local acc=$RESULTS/cnn-accuracy.csv timing=$RESULTS/cnn-timing.csv
  [ -s "$acc" ] || acc=/dev/null
  [ -s "$timing" ] || timing=/dev/null
  bench '/^\$ /!p' "$PY" scripts/cnn_tables.py --accuracy "$acc" --timing "$timing" --outdir "$results" --dat "$results/cnn-speedup.dat" || return 1
  grep -E '^\| (report|ours)' "$results/cnn-table4.md" | cut -c1-170 | sed 's/^/    /'
}
cnn_bench() {
  have_torch || { skip_note "$cur_step" "$torch_reason"; return 3; }
  have_data "$DATA" || return 3
  local args
  read -r -a args <<<"$(by_mode "" "--quick" "--data data/mnist --train 1000 --epochs 2 --runs 1")"
  bench '/^median over/,$p' bench/cnn-bench.sh "${args[@]}" --cores "$C" --grid "$(commas "$SWEEP_PAIRS")" --csv "$results/bench-cnn.csv"
}
cnn_hyperfine() {
  hyperfine_step cnn cnn-1x1 "scripts/mpirun.sh 1 cnn/cnn --threads 1 $HF_ARGS" \
                     "cnn-${C}x1" "scripts/mpirun.sh $C cnn/cnn --threads 1 $HF_ARGS"
}
steps_cnn() {
  local q; q=$(by_mode '' ', quick subset' ', 1k samples, 2 epochs')
  add_step cnn-accuracy cnn_accuracy "cnn: seed report 003's convergence runs, MNIST digits, lr 0.01: 1x1, 2x2 (global batch 32), 2 and 4 ranks x 32 per rank$q -> $results/cnn-accuracy.csv" cnn-accuracy.csv
  add_step cnn-timing cnn_timing "cnn: $(by_mode '5 epochs of 60k Fashion-MNIST images' '2 epochs of 10k Fashion-MNIST images' '2 epochs of 1k MNIST digits'), P x T = $SWEEP_PAIRS -> $results/cnn-timing.csv" cnn-timing.csv
  add_step cnn-tables cnn_tables "cnn: seed report 003's Tables 3, 4, 5 -> $results/cnn-table{3,4,5}.md (figure: plots step)" "cnn-table3.md cnn-table4.md cnn-table5.md cnn-speedup.dat"
  add_step cnn-bench cnn_bench "cnn vs PyTorch, $SWEEP_PAIRS and torch $(words "$ONE_C") threads (bench/cnn-bench.sh$(by_mode '' ' --quick' ', 1k MNIST digits, 1 run')) -> $results/bench-cnn.csv" bench-cnn.csv
  add_step hyperfine-cnn cnn_hyperfine "$(hf_desc cnn "cnn/cnn 1 rank x 1 thread and $C ranks x 1 thread, batch 32")" hyperfine-cnn.json
}

# --- cuda --- (only where a GPU works; PARTRAIN_CUDA_BIN, a test hook, names another
# binary, e.g. cuda/cuda-emu, to exercise these steps without a GPU)
CUDA_BIN=${PARTRAIN_CUDA_BIN:-cuda/cuda}
cuda_kernels() {
  have_data "$DATA" || return 3
  local csv=$results/cuda.csv ok=0 args list flags kargs
  read -r -a args <<<"$(by_mode "--epochs 4" "--train 10000 --epochs 3" "--train 1000 --test 500 --epochs 2")"
  args=(--data "$DATA" --batch 64 --quiet --csv "$csv" "${args[@]}")
  list=$(variant_table "$CUDA_BIN") || return 1
  run_logged "${LOCKED[@]}" "${PIN1[@]}" serial/serial "${args[@]}" || return 1
  while IFS=$'\t' read -r _ flags _; do   # every kernel the binary lists, with its flags
    read -r -a kargs <<<"$flags"
    run_logged "${LOCKED[@]}" "$CUDA_BIN" "${kargs[@]}" "${args[@]}" </dev/null ||
      { skip_note cuda "$CUDA_BIN $flags failed on this GPU: $(grep -v '^\$' "$log" | tail -n 1)"; ok=1; }
  done <<<"$list"
  # a failing kernel is reported in skipped.txt, never fails the run
  [ $ok = 0 ] || note "some kernels failed (see $RESULTS/skipped.txt)"
  return 0
}
cuda_hyperfine() {
  hyperfine_step cuda cuda-tiled "$CUDA_BIN --kernel tiled $HF_ARGS"
}
cuda_usable() {   # the probe: a tiny run on the GPU (else a group_skip line with the reason)
  local probe rc
  [ -d data/mnist ] || { group_skip cuda "data/mnist missing: cannot probe the GPU (scripts/get-data.sh)"; return 1; }
  probe=$("$CUDA_BIN" --data data/mnist --train 64 --test 16 --hidden 8 --epochs 1 --kernel naive --csv none 2>&1); rc=$?
  case $rc in
    0) ;;
    3) group_skip cuda "no GPU: $(printf '%s\n' "$probe" | tail -n 1)"; return 1 ;;
    *) group_skip cuda "$CUDA_BIN failed on a tiny probe run (exit $rc): $(printf '%s\n' "$probe" | tail -n 1)"; return 1 ;;
  esac
}
# the kernels of $CUDA_BIN --list-variants as the step line names them: "naive, tiled 16, ..."
cuda_kernels_desc() {
  local list
  [ $list_steps != 1 ] || return 0      # only the ids are listed: no need to start the binary
  list=$(variant_table "$CUDA_BIN" 2>/dev/null) || { echo "every kernel"; return; }
  cut -f2 <<<"$list" | sed 's/^--kernel //; s/ --tile / /' | paste -sd, | sed 's/,/, /g'
}
steps_cuda() {
  add_step cuda cuda_kernels "cuda: --kernel $(cuda_kernels_desc) and serial, batch 64, $(by_mode '60k Fashion-MNIST, 4 epochs' '10k Fashion-MNIST, 3 epochs' '1k MNIST digits, 2 epochs') -> $results/cuda.csv" cuda.csv
  add_step hyperfine-cuda cuda_hyperfine "$(hf_desc cuda "$CUDA_BIN --kernel tiled")" hyperfine-cuda.json
}

# --- imagesize --- (seed report 002: duration vs image size)
imagesize_sweep() {
  have_data "$DATA" || return 3
  local csv=$results/imagesize.csv ok=0 more s
  read -r -a more <<<"$(by_mode "--train 10000 --test 2000 --epochs 3" "--train 4000 --test 1000 --epochs 2" "--train 1000 --test 200 --epochs 2")"
  local args=(--data "$DATA" --batch 64 --quiet --csv "$csv" "${more[@]}")
  local omp=0 mpi=0
  if [ -x openmp/openmp ]; then omp=1; else skip_note imagesize "openmp/openmp not built: no OpenMP points (make all)"; fi
  if [ -x mpi/mpi ] && command -v mpirun >/dev/null; then mpi=1; else skip_note imagesize "mpi/mpi or mpirun missing: no MPI points"; fi
  for s in 28 57 112; do
    run_logged "${LOCKED[@]}" "${PIN1[@]}" serial/serial --image-size $s "${args[@]}" || ok=1
    # shellcheck disable=SC2046  # passive_env: one word or none
    [ $omp = 0 ] || run_logged "${LOCKED[@]}" env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(passive_env "$C") \
                      taskset -c "$(cpus_for "$C")" openmp/openmp --threads "$C" --accum loop --image-size $s "${args[@]}" || ok=1
    [ $mpi = 0 ] || run_logged "${LOCKED[@]}" scripts/mpirun.sh "$C" mpi/mpi --sync allreduce --image-size $s "${args[@]}" || ok=1
  done
  [ $ok = 0 ] || return 1
  "$PY" scripts/imagesize.py "$csv" --table | sed 's/^/    /'
}
steps_imagesize() {
  add_step imagesize imagesize_sweep "imagesize: seed report 002's duration vs image size, --image-size 28, 57, 112 (784, 3249, 12544 inputs), $(by_mode '10k Fashion-MNIST, 3 epochs' '4k Fashion-MNIST, 2 epochs' '1k MNIST digits, 2 epochs'): serial (1 core), openmp T = $C, mpi P = $C allreduce -> $results/imagesize.csv" imagesize.csv
}

# --- model --- (the alpha-beta model's data: bench/comm and the trainer runs on this
# machine and, as root with Slurm's packages, across simulated hosts at several link rates)
model_data() {
  have_data "$DATA" || return 3
  local ranks="" p
  for p in $SWEEP_RANKS; do [ "$p" -lt 2 ] || ranks+="$p "; done
  [ -n "$ranks" ] || ranks=2
  case $mode in
    full)  bench '/^\[[0-9]*\/[0-9]*\] /p' bench/comm.sh --transport shm --ranks-list "$ranks" --csv "$results/comm.csv" --dat "$results/comm-shm.dat" || return 1
           bench '/^\[[0-9]*\/[0-9]*\] /p' bench/model-runs.sh --ranks "$ONE_C" --csv "$results/model-runs.csv" || return 1 ;;
    quick) bench '/^\[[0-9]*\/[0-9]*\] /p' bench/comm.sh --transport shm --ranks-list "$ranks" --gap-rows "32 256" --csv "$results/comm.csv" --dat "$results/comm-shm.dat" -- --max-bytes 1048576 || return 1
           bench '/^\[[0-9]*\/[0-9]*\] /p' bench/model-runs.sh --ranks "$ONE_C" --train 4000 --serial-batches "16 64 256" --hybrid "" --csv "$results/model-runs.csv" || return 1 ;;
    smoke) bench '/^\[[0-9]*\/[0-9]*\] /p' bench/comm.sh --transport shm --ranks-list 2 --gap-rows "32 256" --csv "$results/comm.csv" --dat "$results/comm-shm.dat" -- --max-bytes 65536 --iters 20 || return 1
           bench '/^\[[0-9]*\/[0-9]*\] /p' bench/model-runs.sh --data data/mnist --train 1000 --epochs 2 --ranks "1 2" --batches 64 --serial-batches "16 64" --hybrid "" --csv "$results/model-runs.csv" || return 1 ;;
  esac
  local cl=(bench/cluster-bench.sh --dir "$results" --run-rates "1gbit 10gbit")
  [ $mode != quick ] || cl+=(--quick --rates "1gbit 10gbit")
  if [ $mode = smoke ]; then
    skip_note "$cur_step" "simulated cluster not run in --smoke (bench/cluster-bench.sh --quick: about a minute)"
  elif [ "$(id -u)" != 0 ] || [ ! -x /usr/sbin/slurmd ] ||
       ! scripts/localcluster.sh --name pbench --dir /tmp/partrain-cluster-bench cpu-usage >/dev/null 2>&1; then
    skip_note "$cur_step" "simulated cluster not run: needs root, cgroups and Slurm's packages (scripts/setup.sh; docs/cluster.md)"
  else
    bench '/^\[[0-9]*\/[0-9]*\] \|^cluster-bench: /p' "${cl[@]}" || return 1
  fi
  "$PY" scripts/model.py validate --comm "$results/comm.csv" --runs "$results/model-runs.csv" | tail -n 3 | sed 's/^/    /'
}
steps_model() {
  add_step model model_data "model: bench/comm (allreduce, reduce-bcast, hierarchical, iallreduce, barrier) at P = 2 .. $(words "$SWEEP_RANKS" | awk '{print $NF}'), the trainer runs of the alpha-beta model (bench/model-runs.sh), and, as root with Slurm, N simulated hosts (N = the cores, 2 to 4) at 1/10/25 Gbit, trainers at 1 and 10 (bench/cluster-bench.sh) -> $results/comm.csv, $results/model-runs.csv" "comm.csv model-runs.csv comm-shm.dat comm-tcp-1gbit.dat comm-tcp-10gbit.dat comm-tcp-25gbit.dat"
}

# --- fake --- (a test hook, not a group unless PARTRAIN_TEST_FAKE_STEP=SECONDS is set:
# its step fake-rows appends one row every 0.2 s for SECONDS seconds to fake.csv from a
# child process and notes its process group in its log; tests/test_runall_faults.sh)
fake_rows() {
  echo "pgid $(ps -o pgid= -p $BASHPID | tr -d ' ')" >>"$log"
  bash -c 'echo id,value; for ((i = 1; i <= $1 * 5; i++)); do echo "$i,x"; sleep 0.2; done' fake "$PARTRAIN_TEST_FAKE_STEP" >>"$results/fake.csv"
}
steps_fake() {
  add_step fake-rows fake_rows "fake: one row every 0.2 s for ${PARTRAIN_TEST_FAKE_STEP:-0} s (a test hook) -> $results/fake.csv" fake.csv
}

# --- plots and report ---
plots_step() {
  command -v gnuplot >/dev/null || { skip_note plots "gnuplot missing: no figures (apt-get install gnuplot-nox)"; return 3; }
  local out rc=0
  out=$(scripts/plot.sh --results "$results" --plots "$plotdir" 2>&1) || rc=$?
  printf '%s\n' "$out" >>"$log"
  printf '%s\n' "$out" | sed 's/^/    /'
  printf '%s\n' "$out" | sed -n 's/^plot: skipped \([^:]*\): \(.*\)$/\1\t\2/p' |
    while IFS=$'\t' read -r what why; do printf 'plots\t%s not drawn: %s\n' "$what" "$why" >>"$skipdir/plots"; done
  return $rc
}
report_step() {
  [ -f scripts/report.py ] || { skip_note report "scripts/report.py not present: no REPORT.md"; return 3; }
  assemble_skipped
  bench '/^\$ /!p' "$PY" scripts/report.py --results "$results" --plots "$plotdir" --out "$results/REPORT.md" || return 1
  note "-> $results/REPORT.md"
}

# ---------------------------------------------------------------- registration
# group_usable GROUP: whether this machine can run the group's steps (else a group_skip
# line says why)
group_usable() {
  local p=$1 bin
  [ "$p" != fake ] || return 0
  if [ "$p" = model ]; then
    [ -x bench/comm ] && [ -x mpi/mpi ] && [ -x serial/serial ] || { group_skip model "bench/comm, mpi/mpi or serial/serial not built (make all)"; return 1; }
    command -v mpirun >/dev/null || { group_skip model "mpirun not found (apt-get install openmpi-bin)"; return 1; }
    return 0
  fi
  if [ "$p" = imagesize ]; then
    [ -x serial/serial ] || { group_skip imagesize "serial/serial not built (make all)"; return 1; }
    return 0
  fi
  bin=$p/$p; [ $p = cuda ] && bin=$CUDA_BIN
  if [ ! -x "$bin" ]; then
    if [ $p = cuda ]; then
      if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
        group_skip cuda "cuda/cuda not built although nvcc exists (see make all)"
      else
        group_skip cuda "no nvcc: cuda/cuda not built (install the CUDA toolkit)"
      fi
    elif [ -f "$p/$p.c" ]; then
      group_skip "$p" "$p/$p did not build (see make all)"
    else
      group_skip "$p" "not implemented yet (no $p/$p.c)"
    fi
    return 1
  fi
  case $p in
    mpi|hybrid|cnn) command -v mpirun >/dev/null || { group_skip "$p" "mpirun not found (apt-get install openmpi-bin)"; return 1; } ;;
    cuda) cuda_usable || return 1 ;;
  esac
}
for p in "${selected[@]}"; do
  if [ $list_steps = 1 ]; then "steps_$p"; continue; fi
  [ $plan = 1 ] || rm -f "$skipdir/group-$p"
  group_usable "$p" && "steps_$p"
done
add_step plots plots_step "plots: every figure from the CSVs in $results/ (scripts/plot.sh, as make plots) -> $plotdir/*.png"
add_step report report_step "report: scripts/report.py -> $results/REPORT.md"
if [ $list_steps = 1 ]; then printf '%s\n' "${step_id[@]}"; exit 0; fi

# ---------------------------------------------------------------- run
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
assemble_skipped
set -m    # every step runs in its own process group, which an interruption stops as a whole
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
  # a step with outputs writes them into its staging directory DIR/.partial/STEP (the
  # step function sees it as $results); they are renamed into DIR only when the step
  # function returns, so an interrupted or killed step leaves no partial rows in DIR
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
    [ ! -e "$stage/$f" ] || mv -f "$stage/$f" "$results/$f"
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
