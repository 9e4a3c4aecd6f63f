# scripts/run_all-steps.sh — the commands of run_all.sh's steps (sourced by run_all.sh,
# after its options, C and the lists are set; run_all.sh holds the table of steps, which
# names these functions, and the driver that runs them). docs/sweeps.md describes the
# steps. A step function writes its outputs under $results (its staging directory) and
# returns 0 (done), 3 (skipped: its skip_note says why) or anything else (failed).
# shellcheck shell=bash
# shellcheck disable=SC2154  # mode, results, C, ...: run_all.sh's
export LC_ALL=C
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

# the lists a sweep step's estimate (run_all.sh's table) was measured with on 2 cores,
# and this run's lists (run_all.sh's est_of scales the estimate by them)
est_lists() {   # ID: "BASE LIST|THIS RUN'S LIST" of a sweep step; nothing for the others
  case $1 in
    openmp-bench|mpi-bench) echo "1 2|$ONE_C" ;;
    openmp-sweep) echo "$(by_mode '1 2 4 8' '1 2 4 8' '1 2 4')|$SWEEP_THREADS" ;;
    mpi-sweep) echo "$(by_mode '1 2 4 8' '1 2 4' '1 2 4')|$SWEEP_RANKS" ;;
    hyperfine-openmp|hyperfine-mpi|imagesize|timelines) echo "2|$C" ;;
    hyperfine-hybrid) echo "1x2 2x1|1x$C ${C}x1" ;;
    hyperfine-cnn) echo "1x1 2x1|1x1 ${C}x1" ;;
    hybrid-bench|cnn-timing|cnn-bench) echo "1x1 1x2 2x1 2x2|$SWEEP_PAIRS" ;;
    hybrid-grid) echo "1x1 1x2 1x4 2x1 2x2 2x4 4x1 4x2 4x4|$SWEEP_GRID" ;;
  esac
}

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
    quick) bench '/^\[[0-9]*\/[0-9]*\] /p' bench/comm.sh --transport shm --ranks-list "$ranks" --csv "$results/comm.csv" --dat "$results/comm-shm.dat" -- --max-bytes 1048576 || return 1
           bench '/^\[[0-9]*\/[0-9]*\] /p' bench/model-runs.sh --ranks "$ONE_C" --train 4000 --serial-batches "16 64 256" --hybrid "" --csv "$results/model-runs.csv" || return 1 ;;
    smoke) bench '/^\[[0-9]*\/[0-9]*\] /p' bench/comm.sh --transport shm --ranks-list 2 --csv "$results/comm.csv" --dat "$results/comm-shm.dat" -- --max-bytes 65536 --iters 20 || return 1
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

# --- tta --- (time to accuracy vs the global batch; the strategy from the bench CSVs
# already in the results directory: bench/tta-sweep.sh, docs/tta.md)
tta_sweep() {
  local data=data/fashion args
  [ $mode != smoke ] || data=data/mnist
  have_data $data || return 3
  read -r -a args <<<"$(by_mode "" "--quick" "--smoke")"
  bench '/^batch  lr/,$p' bench/tta-sweep.sh "${args[@]}" --cores "$C" --results "$RESULTS" \
    --csv "$results/tta.csv" --best "$results/tta-best.txt" --diverged "$results/tta-diverged.txt" || return 1
  note "strategy: $(cut -f1,2 "$results/tta-best.txt" | sed 's/\t/: /')"
}

# --- trace --- (issue 32: where each strategy's step goes. One short run per strategy with
# --trace: 2 epochs, 50 steps of epoch 2 traced (warm caches, no first-touch page
# faults); scripts/trace_summary.py's per-rank numbers into trace-summary.csv; the
# figures, timeline-NAME.png, are the plots step's (scripts/plot.sh draws them from
# DIR/traces alone, so make plots redraws them))
TRACE_RUNS=(serial openmp-critical openmp-reduction mpi-allreduce mpi-reduce-bcast mpi-overlap pipeline hybrid)
TRACE_T=$C; [ "$TRACE_T" -le $((2 * REAL_CORES)) ] || TRACE_T=$((2 * REAL_CORES))   # threads: C, at most 2x the real cores
TRACE_STAGES=$C; [ "$TRACE_STAGES" -le 3 ] || TRACE_STAGES=3       # the pipeline: one stage per layer at most
TRACE_HP=$(( C >= 2 ? 2 : 1 )); TRACE_HT=$(( C / TRACE_HP > 0 ? C / TRACE_HP : 1 ))   # hybrid: 2 ranks x C/2 threads
trace_outputs() { local n o=""; for n in "${TRACE_RUNS[@]}"; do o+="traces/$n.json "; done; echo "${o% }"; }
trace_runs_desc() {
  echo "serial, openmp --accum critical and reduction T = $TRACE_T, mpi --sync allreduce, reduce-bcast and overlap P = $C, pipeline P = $TRACE_STAGES, hybrid ${TRACE_HP}x$TRACE_HT"
}
# trace_cmd NAME: sets cmd to the command line of strategy NAME (without the run's flags);
# status 1 (a skip_note says why) when its program is not built, has no --trace or needs mpirun
trace_cmd() {
  local prog env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
  case $1 in
    serial) prog=serial/serial; cmd=("${PIN1[@]}" serial/serial) ;;
    openmp-*) prog=openmp/openmp
      # shellcheck disable=SC2046,SC2207  # passive_env: one word or none
      cmd=("${env[@]}" $(passive_env "$TRACE_T") taskset -c "$(cpus_for "$TRACE_T")" openmp/openmp --threads "$TRACE_T" --accum "${1#openmp-}") ;;
    mpi-*) prog=mpi/mpi; cmd=(scripts/mpirun.sh "$C" mpi/mpi --sync "${1#mpi-}") ;;
    pipeline) prog=mpi/pipeline; cmd=(scripts/mpirun.sh "$TRACE_STAGES" mpi/pipeline) ;;
    hybrid) prog=hybrid/hybrid
      local bind=(); [ "$TRACE_HT" -le 1 ] || bind=(--bind-to-none)
      # shellcheck disable=SC2046,SC2207
      cmd=("${env[@]}" $(passive_env $((TRACE_HP * TRACE_HT))) scripts/mpirun.sh "${bind[@]}" "$TRACE_HP" hybrid/hybrid --threads "$TRACE_HT") ;;
  esac
  [ -x "$prog" ] || { skip_note "$cur_step" "$1 not traced: $prog not built (make all)"; return 1; }
  "$prog" --help 2>&1 | grep -q -- '--trace ' || { skip_note "$cur_step" "$1 not traced: $prog has no --trace (a build from before issue 32)"; return 1; }
  [ "$prog" = serial/serial ] || [ "$prog" = openmp/openmp ] || command -v mpirun >/dev/null ||
    { skip_note "$cur_step" "$1 not traced: mpirun not found (apt-get install openmpi-bin)"; return 1; }
}
trace_timelines() {
  have_data "$DATA" || return 3
  local name ok=0 traced=() more cmd=()
  local train; train=$(by_mode 10000 10000 1000)
  local epoch_steps=$(( (train + 63) / 64 ))   # batch 64: epoch 2 begins at this step
  mkdir -p "$results/traces" || return 1
  for name in "${TRACE_RUNS[@]}"; do
    trace_cmd "$name" || continue
    run_logged "${LOCKED[@]}" "${cmd[@]}" --data "$DATA" --train "$train" --test 500 --batch 64 --epochs 2 --quiet \
      --csv none --trace "$results/traces/$name.json" --trace-from "$epoch_steps" --trace-steps 50 || { ok=1; continue; }
    traced+=("$results/traces/$name.json")
  done
  [ ${#traced[@]} -gt 0 ] || { [ $ok = 0 ] && return 3; return 1; }
  bench '/^\$ /!p' "$PY" scripts/trace_summary.py --csv "$results/trace-summary.csv" "${traced[@]}" || return 1
  "$PY" scripts/trace_summary.py "${traced[@]}" >>"$log" 2>&1
  for name in "${traced[@]}"; do   # the rank each strategy's ranks waited for
    note "$(basename "$name" .json): $("$PY" scripts/trace_summary.py "$name" | tail -n 1)"
  done
  return $ok
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

# group_usable GROUP: whether this machine can run the group's steps (else a group_skip
# line says why)
group_usable() {
  local p=$1 bin
  if [ "$p" = model ]; then
    [ -x bench/comm ] && [ -x mpi/mpi ] && [ -x serial/serial ] || { group_skip model "bench/comm, mpi/mpi or serial/serial not built (make all)"; return 1; }
    command -v mpirun >/dev/null || { group_skip model "mpirun not found (apt-get install openmpi-bin)"; return 1; }
    return 0
  fi
  if [ "$p" = tta ]; then
    [ -x serial/serial ] || { group_skip tta "serial/serial not built (make all)"; return 1; }
    return 0
  fi
  if [ "$p" = trace ]; then   # the trainers write traces since issue 32 (serial/serial answers for them)
    [ -x serial/serial ] || { group_skip trace "serial/serial not built (make all)"; return 1; }
    serial/serial --help 2>&1 | grep -q -- '--trace ' ||
      { group_skip trace "the trainers have no --trace (a build from before issue 32: make all)"; return 1; }
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
