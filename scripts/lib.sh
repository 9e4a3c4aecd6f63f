# scripts/lib.sh — what the suite's scripts share (sourced, after `cd` to the repository
# root and `set -euo pipefail`): the benchmark scripts (bench/*.sh), run_all.sh, scripts/*.sh,
# the Makefile and the tests (PARTRAIN_PYTHON, the variant lists, the sweep lists):
#   PARTRAIN_PYTHON   the Python interpreter of every PyTorch run and every script, chosen
#                     here only: Debian's /usr/bin/python3, the one that sees python3-torch
#                     (override: PARTRAIN_PYTHON=/path/to/python3 in the environment)
#   LOCK              the benchmark lock every timed run holds (flock): /tmp/partrain-bench.lock,
#                     or PARTRAIN_BENCH_LOCK (a test hook: tests that run a bench script
#                     for its outputs, not its timings, take a private lock and so never
#                     wait for a benchmark of another job)
#   bench_usage       the calling script's header comment as its --help
#   die MSG           "NAME: MSG" on stderr, exit 2 (NAME: the script's name without .sh)
#   need_value OPT "$@"   a usage error unless OPT has a non-empty value
#   need_tools T...   die unless every tool T is installed (with its Debian package)
#   need_built B...   die unless every program B is built
#   variant_table PROG, variant_names PROG, variant_flags PROG NAME, load_variants PROG
#                     PROG's variants, from `PROG --list-variants` (NAME<TAB>FLAGS<TAB>DESCRIPTION)
#   cpu_ticks, wait_idle LIMIT WINDOW PCT    the idle check of a shared machine
#   idle_or_busy LIMIT WINDOW PCT   wait_idle that says once "the machine is busy" (bench_busy)
#   bench_load_option OPT VALUE     the options --tries N, --max-other C, --idle-wait S of every
#                     benchmark that writes rows (BENCH_TRIES, BENCH_MAX_OTHER: default 0.05
#                     cores, BENCH_IDLE_WAIT)
#   bench_run LABEL CMD...   one timed run under the lock, its summary line shown; the other
#                     load during it measured (other_load_cores) and, with BENCH_CSV set,
#                     the trainer's row appended there with the columns other_load_cores,
#                     disturbed (1: above BENCH_MAX_OTHER); repeated while disturbed (BENCH_TRIES)
#   bench_corun_init BOUNDS   the per-round core bound of openmp-bench and hybrid-bench:
#                     BENCH_CORUN (C, or 0 when C < 2 or above the real cores), its log, and
#                     BENCH_BOUND_ARGS for bench_tables.py (writing BOUNDS, checked first)
#   bench_corun B CMD...   C copies of CMD at once (bench/corun.sh), no row: the round's
#                     core bound at batch B, "B epoch-of-each-copy..." appended to the log
#   bench_check_csv CSV       exit 2 unless CSV is absent, empty or a results CSV of this version
#   bench_check_bounds CSV    exit 2 unless CSV is absent, empty or a bounds CSV (bench_tables.py --bounds)
#   bench_append NEW CSV      NEW's rows appended to CSV, an older CSV's header upgraded once
#   append_rows NEW CSV       NEW's rows appended to CSV atomically (header once)
#   bench_tmp         BENCH_TMP, a temporary directory removed on exit (the EXIT trap)
#   bench_at_exit CMD CMD run on exit too (scripts set no EXIT trap of their own)
#   utc_now           the time in the CSVs' timestamp format
#   cpu_kind          this CPU in one line: model, family/model, AMD's core name where
#                     known, and the widest vector unit the kernel uses (AVX-512 or AVX2)
#   bench_cpu_line    "NAME: CPU <cpu_kind>": every benchmark names the CPU kind it ran on
#   sweep_option OPT VALUE, sweep_setup MODE, machine_cores, sweep_list MAX [quick],
#   grid_list C CAP [pairs]   the thread, rank and P x T lists of every sweep, derived
#                     from the machine's cores in one place (see "the sweep lists" below;
#                     docs/sweeps.md)
# A machine that does not get quiet never stops a benchmark: it prints once
#   bench: the machine is busy (N% of a core of outside load); measuring anyway, rows marked disturbed
# and every row measured while other load exceeded --max-other has disturbed=1.
# Every bench/*.sh that ends with a non-zero status says why in one line on stderr: its
# own checks (die: exit 2; a failed run: exit 1) or, for any other failing command under
# set -e, the ERR trap below.
# Shell only; no global state beyond the variables named here and BENCH_*.
# shellcheck shell=bash
# shellcheck disable=SC2034  # PY, VARIANT_FLAGS, BENCH_*: for the scripts that source this
export LC_ALL=C   # numbers read and printed the same under every locale (0.5, never 0,5)

PARTRAIN_PYTHON=${PARTRAIN_PYTHON:-/usr/bin/python3}
export PARTRAIN_PYTHON
PY=$PARTRAIN_PYTHON
LOCK=${PARTRAIN_BENCH_LOCK:-/tmp/partrain-bench.lock}
BENCH_NAME=$(basename "$0" .sh)

# A benchmark script (bench/*.sh, under set -e) never ends silently: a command that fails
# and so ends the script prints "NAME: line L: COMMAND failed (exit S)" first (ERR trap,
# inherited by functions and subshells with set -E; printed by the script's own shell only).
case $0 in
  bench/*|*/bench/*)
    if [[ $- == *e* ]]; then
      set -E
      # shellcheck disable=SC2154  # bench_err_rc: set by the trap itself
      trap 'bench_err_rc=$?; [ "$BASHPID" != "$$" ] || echo "$BENCH_NAME: line $LINENO: $BASH_COMMAND failed (exit $bench_err_rc)" >&2' ERR
    fi ;;
esac
bench_usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "$BENCH_NAME: $*" >&2; exit 2; }
need_value() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"; }
need_tools() {
  local t pkg
  for t in "$@"; do
    case $t in
      flock|taskset) pkg=util-linux ;; mpirun) pkg=openmpi-bin ;; mpicc) pkg=libopenmpi-dev ;;
      gnuplot) pkg=gnuplot-nox ;; *) pkg=$t ;;
    esac
    command -v "$t" >/dev/null || die "$t missing (apt-get install $pkg)"
  done
}
need_built() {
  local b
  for b in "$@"; do [ -x "$b" ] || die "$b is not built (run: make all)"; done
}
# cpu_kind: "AMD EPYC, family 25 model 1 (Zen 3), AVX2 + FMA, no AVX-512". The family alone
# does not name the core: AMD's family 25 is Zen 3 and Zen 4 by model (Milan 0x01, Genoa 0x11).
cpu_kind() {
  local name fam mod core="" isa
  name=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
  fam=$(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
  mod=$(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
  if [[ $name == *AMD* && $fam =~ ^[0-9]+$ && $mod =~ ^[0-9]+$ ]]; then
    case $fam in
      23) if [ "$mod" -ge 48 ]; then core="Zen 2"; else core="Zen or Zen+"; fi ;;
      25) if (( (mod >= 16 && mod <= 31) || (mod >= 96 && mod <= 127) || (mod >= 160 && mod <= 175) )); then
            core="Zen 4"; else core="Zen 3"; fi ;;
      26) core="Zen 5" ;;
    esac
  fi
  if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then isa="AVX-512"
  elif grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo 2>/dev/null; then isa="AVX2 + FMA, no AVX-512"
  else isa="no AVX2"; fi
  echo "${name:-unknown CPU}, family ${fam:-?} model ${mod:-?}${core:+ ($core)}, $isa"
}
bench_cpu_line() { echo "$BENCH_NAME: CPU $(cpu_kind)"; }
utc_now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# ---------------------------------------------------------------- variants
# variant_table PROG: PROG's `--list-variants` lines; a clear error (exit status 2 from the
# calling script, or return 1 under `if`) when PROG is not built or cannot list them
variant_table() {
  local out
  [ -x "$1" ] || { echo "$BENCH_NAME: $1 is not built (make all): cannot list its variants" >&2; return 1; }
  if ! out=$("$1" --list-variants 2>&1) || [ -z "$out" ]; then
    echo "$BENCH_NAME: $1 --list-variants failed ($(printf '%s\n' "$out" | tail -n 1)): rebuild it (make all)" >&2
    return 1
  fi
  printf '%s\n' "$out" | awk -F'\t' 'NF == 3 && $1 != ""'
}
variant_names() { local t; t=$(variant_table "$1") || return 1; printf '%s\n' "$t" | cut -f1; }
# load_variants PROG: VARIANTS (the names, in PROG's order) and VARIANT_FLAGS[name] (the
# flags that select it, e.g. "--accum loop"); status 1 (the error on stderr) when PROG
# cannot list them
declare -a VARIANTS=()
declare -A VARIANT_FLAGS=()
load_variants() {
  local t n f
  t=$(variant_table "$1") || return 1
  VARIANTS=() VARIANT_FLAGS=()
  while IFS=$'\t' read -r n f _; do VARIANTS+=("$n"); VARIANT_FLAGS[$n]=$f; done <<<"$t"
}
variant_flags() {   # PROG NAME: the flags that select NAME (e.g. "--kernel tiled --tile 16")
  local t; t=$(variant_table "$1") || return 1
  printf '%s\n' "$t" | awk -F'\t' -v n="$2" '$1 == n { print $2; f = 1 } END { exit !f }' ||
    { echo "$BENCH_NAME: $1 has no variant '$2' ($(printf '%s\n' "$t" | cut -f1 | tr '\n' ' '))" >&2; return 1; }
}

# ---------------------------------------------------------------- idle check
# cpu_ticks: "BUSY TOTAL" jiffies of all CPUs (/proc/stat; iowait is neither busy nor idle);
# bench_ticks: the same into BENCH_TICKS_BUSY and BENCH_TICKS_TOTAL, without a process
bench_ticks() {
  local u n s i w q sq st
  read -r _ u n s i w q sq st _ </proc/stat
  BENCH_TICKS_BUSY=$((u + n + s + q + sq + st)) BENCH_TICKS_TOTAL=$((u + n + s + i + w + q + sq + st))
  BENCH_TICKS_SOFTIRQ=$sq
}
cpu_ticks() { bench_ticks; echo "$BENCH_TICKS_BUSY $BENCH_TICKS_TOTAL"; }
# wait_idle LIMIT WINDOW PCT: wait up to LIMIT seconds for WINDOW seconds in which the CPUs
# were at least PCT % idle; status 1 (and BENCH_IDLE, the last window's idle %) when the
# limit passed first
wait_idle() {
  local end=$((SECONDS + $1)) b0 t0 b1 t1
  BENCH_IDLE=100
  while [ $SECONDS -lt "$end" ]; do
    read -r b0 t0 < <(cpu_ticks); sleep "$2"; read -r b1 t1 < <(cpu_ticks)
    [ $(( 100 * (b1 - b0) )) -le $(( (100 - $3) * (t1 - t0) )) ] && return 0
    BENCH_IDLE=$(( t1 > t0 ? 100 - 100 * (b1 - b0) / (t1 - t0) : 100 ))
  done
  return 1
}
# bench_busy PCT: the one line (once per script, BENCH_BUSY=1) that says the machine is
# busy, PCT: the outside load in % of a core
#   bench: the machine is busy (N% of a core of outside load); measuring anyway, rows marked disturbed
BENCH_BUSY=0
bench_busy() {
  [ "$BENCH_BUSY" = 0 ] || return 0
  BENCH_BUSY=1
  echo "bench: the machine is busy ($1% of a core of outside load); measuring anyway, rows marked disturbed" >&2
}
# idle_or_busy LIMIT WINDOW PCT: wait_idle, but never a reason to stop: when the machine
# does not get idle, the benchmark measures anyway (bench_busy says so, the first time);
# from then on each wait is one WINDOW (the machine may calm down).
# Status 0 when the machine was idle, 1 when busy (for `if`; never fatal under set -e
# when used as `idle_or_busy ... || true` or in a condition).
idle_or_busy() {
  local limit=$1
  [ "$BENCH_BUSY" = 0 ] || limit=$2
  wait_idle "$limit" "$2" "$3" && return 0
  bench_busy $(( (100 - BENCH_IDLE) * $(nproc) ))
  return 1
}

# ---------------------------------------------------------------- the load during a run
# Other work on a shared machine slows a run (a threaded one most: a thread that loses its
# core stalls every barrier of its team). bench_run measures it for every run: the CPU time
# all CPUs were busy (/proc/stat) minus the CPU time of this script's finished children
# (the run itself: bash's `times`), over the run's wall time, in cores. Above
# BENCH_MAX_OTHER the run is "disturbed": it is repeated (up to BENCH_TRIES attempts in all,
# each after an idle check), and a run that never got a quiet machine is kept, marked.
# The scripts set these from their options --max-other C, --tries N, --idle-wait S
# (bench_load_option):
BENCH_MAX_OTHER=0.05   # cores of other load above which a run is disturbed (default 0.05)
BENCH_TRIES=1          # attempts per run while disturbed; above 1, an idle check before each
BENCH_IDLE_WAIT=30     # seconds the first idle check waits for 2 s with the CPUs >= 97 % idle
BENCH_COLS=other_load_cores,disturbed   # the columns bench_run adds after the trainers' schema
# bench_load_option OPT VALUE: OPT one of --tries, --max-other, --idle-wait (checked);
# status 1 for any other OPT
bench_load_option() {
  case $1 in
    --tries) [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--tries: not a positive integer: '$2'"; BENCH_TRIES=$2 ;;
    --max-other) [[ $2 =~ ^[0-9]*\.?[0-9]+$ ]] || die "--max-other: not a number of cores: '$2'"; BENCH_MAX_OTHER=$2 ;;
    --idle-wait) [[ $2 =~ ^[0-9]+$ ]] || die "--idle-wait: not a non-negative integer: '$2'"; BENCH_IDLE_WAIT=$2 ;;
    *) return 1 ;;
  esac
}
# bench_tmp: BENCH_TMP, a temporary directory removed when the script exits (the EXIT
# trap, bench_exit; with BENCH_PENDING, an append_rows in progress); call it in the
# script's own shell. bench_at_exit CMD: CMD (a string, eval'ed) run at exit too, the one
# way for a script to add to the EXIT trap
BENCH_TMP="" BENCH_PENDING="" BENCH_AT_EXIT=""
bench_exit() {
  [ -z "$BENCH_TMP" ] || rm -rf "$BENCH_TMP"
  [ -z "$BENCH_PENDING" ] || rm -f "$BENCH_PENDING"
  eval "$BENCH_AT_EXIT"
}
bench_at_exit() { BENCH_AT_EXIT+="$1"$'\n'; trap bench_exit EXIT; }
bench_tmp() {
  [ -z "$BENCH_TMP" ] || return 0
  BENCH_TMP=$(mktemp -d "/tmp/$BENCH_NAME-XXXXXX")
  BENCH_HZ=$(getconf CLK_TCK)
  trap bench_exit EXIT
}
# bench_children_cpu: CPU seconds (user + system) of this shell's finished children, as
# "S.mmm", without a process (`times` must run in the script's shell, not in $(...))
bench_children_cpu() {
  local u s
  times >"$BENCH_TMP/times"
  { read -r _ _; read -r u s; } <"$BENCH_TMP/times"
  BENCH_CHILDREN=("$u" "$s")
}
# bench_load_start, bench_load_end: around a run; bench_load_end sets BENCH_OTHER (the other
# load in cores, "0.123") and BENCH_DISTURBED (1 when above BENCH_MAX_OTHER, else 0)
# BENCH_OWN_CPU_NS: a command printing the nanoseconds of CPU used so far by processes
# that are the run's own although not this script's children: on the simulated cluster
# (bench/cluster-bench.sh: `scripts/localcluster.sh cpu-usage`) slurmd starts the ranks,
# so their time would otherwise count as other load.
bench_own_cpu() {
  BENCH_OWN_TICKS=0
  [ -n "${BENCH_OWN_CPU_NS:-}" ] || return 0
  local ns; ns=$($BENCH_OWN_CPU_NS) || return 0
  # the simulated links' packet processing (softirq, charged to no process) is the run's too
  BENCH_OWN_TICKS=$((ns * BENCH_HZ / 1000000000 + BENCH_TICKS_SOFTIRQ))
}
bench_load_start() {
  bench_children_cpu; BENCH_C0=("${BENCH_CHILDREN[@]}")
  bench_ticks; BENCH_B0=$BENCH_TICKS_BUSY; bench_own_cpu; BENCH_N0=$BENCH_OWN_TICKS; BENCH_W0=${EPOCHREALTIME/,/.}
}
bench_load_end() {
  local w1=${EPOCHREALTIME/,/.}
  bench_ticks; bench_children_cpu; bench_own_cpu
  read -r BENCH_OTHER BENCH_DISTURBED < <(awk -v b=$((BENCH_TICKS_BUSY - BENCH_B0 - (BENCH_OWN_TICKS - BENCH_N0))) -v hz="$BENCH_HZ" \
    -v w0="$BENCH_W0" -v w1="$w1" -v m="$BENCH_MAX_OTHER" -v c="${BENCH_C0[*]} ${BENCH_CHILDREN[*]}" '
    function sec(t,   a) { split(t, a, "m"); return a[1] * 60 + a[2] }   # "1m2.345s"
    BEGIN { split(c, x, " "); ours = sec(x[3]) + sec(x[4]) - sec(x[1]) - sec(x[2]); w = w1 - w0
            o = w > 0 ? (b / hz - ours) / w : 0; if (o < 0) o = 0
            printf "%.3f %d\n", o, (o > m) }')
}

# ---------------------------------------------------------------- one timed run
# bench_run LABEL CMD...: one timed run of CMD under the benchmark lock (no other benchmark
# of the suite runs meanwhile), its other load measured (above). With BENCH_CSV set, CMD
# is a trainer (or bench/torch_mlp.py): it gets `--csv TMP` (a fresh file per attempt), and
# its row is appended to BENCH_CSV with two more columns, other_load_cores and disturbed
# (bench_append: an older CSV gets them first). A disturbed attempt is repeated while
# attempts are left (BENCH_TRIES); the first disturbed row kept makes bench_busy say once
# that the machine is busy. Output in BENCH_OUT, the load in BENCH_OTHER, BENCH_DISTURBED.
# A failure prints the output and "NAME: run k/total (LABEL) failed (exit S)" and exits 1;
# otherwise the line
#   [k/total] LABEL  SUMMARY  [other load C cores, attempt A] [disturbed]
# (BENCH_TOTAL runs in all; LABEL padded to BENCH_WIDTH; SUMMARY: the trainer's summary
# line, "PROGRAM: ... | ...", else the last line of the output, without its "| csv FILE"
# and cut to BENCH_CUT characters; ", attempt A" only after a repetition, "[disturbed]"
# only when marked; BENCH_CUT=0: no SUMMARY, the whole output follows, indented). BENCH_K
# counts the runs.
BENCH_K=0 BENCH_TOTAL=0 BENCH_WIDTH=22 BENCH_CUT=150 BENCH_OUT="" BENCH_CSV=""
BENCH_OTHER=0 BENCH_DISTURBED=0
bench_run() {
  local label=$1 rc=0 attempt cmd row summary; shift
  BENCH_K=$((BENCH_K + 1))
  bench_tmp
  row=$BENCH_TMP/row.csv cmd=("$@")
  [ -z "$BENCH_CSV" ] || cmd+=(--csv "$row")
  exec 9>>"$LOCK"
  flock 9                      # no other benchmark runs meanwhile
  for ((attempt = 1; attempt <= BENCH_TRIES; attempt++)); do
    # up to BENCH_IDLE_WAIT s for 2 s with the CPUs >= 97 % idle; a busy machine is measured anyway
    [ "$BENCH_TRIES" -eq 1 ] || idle_or_busy "$BENCH_IDLE_WAIT" 2 97 || true
    rm -f "$row"
    bench_load_start
    rc=0; BENCH_OUT=$("${cmd[@]}" 9>&- 2>&1) || rc=$?
    bench_load_end
    if [ $rc -ne 0 ] || [ "$BENCH_DISTURBED" = 0 ]; then break; fi
  done
  flock -u 9
  exec 9>&-
  [ "$attempt" -le "$BENCH_TRIES" ] || attempt=$BENCH_TRIES
  if [ $rc -ne 0 ]; then
    printf '%s\n' "$BENCH_OUT" >&2
    echo "$BENCH_NAME: run $BENCH_K/$BENCH_TOTAL ($label) failed (exit $rc)" >&2
    exit 1
  fi
  [ "$BENCH_DISTURBED" = 0 ] || bench_busy "$(awk -v o="$BENCH_OTHER" 'BEGIN { printf "%d", o * 100 }')"
  if [ -n "$BENCH_CSV" ]; then
    [ -s "$row" ] || { echo "$BENCH_NAME: run $BENCH_K/$BENCH_TOTAL ($label) wrote no CSV row (${cmd[*]})" >&2; exit 1; }
    bench_mark "$row" >"$BENCH_TMP/marked.csv"
    bench_append "$BENCH_TMP/marked.csv" "$BENCH_CSV"
  fi
  summary=$(printf '%s\n' "$BENCH_OUT" | grep -E '^[a-z]+: .*\| ' | tail -n 1) || summary=$(printf '%s\n' "$BENCH_OUT" | tail -n 1)
  [ "$BENCH_CUT" -gt 0 ] && summary=$(printf '%s\n' "$summary" | sed 's/ | csv .*//' | cut -c1-"$BENCH_CUT") || summary=""
  printf "[%d/%d] %-${BENCH_WIDTH}s %s  [other load %s cores%s]%s\n" "$BENCH_K" "$BENCH_TOTAL" "$label" "$summary" \
    "$BENCH_OTHER" "$([ "$attempt" -eq 1 ] || echo ", attempt $attempt")" "$([ "$BENCH_DISTURBED" = 0 ] || echo " [disturbed]")"
  [ "$BENCH_CUT" -gt 0 ] || printf '%s\n' "$BENCH_OUT" | sed 's/^/  /'
}
# bench_corun_init BOUNDS: before any run, BOUNDS (CSV-bounds.csv) checked
# (bench_check_bounds); BENCH_CORUN = C (SWEEP_CORES) when 2 <= C <= the real cores, else 0
# (no bound: C copies above the cores would share them); BENCH_CORUN_LOG emptied; and
# BENCH_BOUND_ARGS, the bound's options of bench_tables.py (empty when BENCH_CORUN is 0)
bench_corun_init() {
  bench_check_bounds "$1"
  bench_tmp
  BENCH_CORUN=0 BENCH_CORUN_LOG=$BENCH_TMP/corun.log BENCH_BOUND_ARGS=()
  : >"$BENCH_CORUN_LOG"
  [ "$SWEEP_CORES" -lt 2 ] || [ "$SWEEP_CORES" -gt "$(nproc)" ] || BENCH_CORUN=$SWEEP_CORES
  [ "$BENCH_CORUN" = 0 ] || BENCH_BOUND_ARGS=(--corun-log "$BENCH_CORUN_LOG" --cores "$BENCH_CORUN" --bounds "$1")
}
# bench_corun B CMD...: (nothing when BENCH_CORUN is 0) one timed run (bench_run, no row)
# of BENCH_CORUN copies of CMD at once, copy i on core i (bench/corun.sh): what the cores
# give with no communication at all; the line "B EPOCH_0 ... EPOCH_C-1" (each copy's
# "epoch median" from its summary line) is appended to BENCH_CORUN_LOG, from which
# bench_tables.py makes the round's core bound (C x the epoch alone / the slowest copy's)
bench_corun() {
  [ "$BENCH_CORUN" != 0 ] || return 0
  local b=$1 saved=$BENCH_CSV; shift
  BENCH_CSV=""
  bench_run "$(basename "$1") x$BENCH_CORUN at once b$b" bench/corun.sh "$BENCH_CORUN" "$@"
  BENCH_CSV=$saved
  echo "$b $(printf '%s\n' "$BENCH_OUT" | sed -n 's/.*| epoch median \([0-9.]*\) s |.*/\1/p' | paste -sd' ')" >>"$BENCH_CORUN_LOG"
}
# bench_mark CSV: CSV (a trainer's rows) with the columns BENCH_COLS added: BENCH_OTHER and
# BENCH_DISTURBED on every row
bench_mark() {
  awk -v o="$BENCH_OTHER" -v d="$BENCH_DISTURBED" -v c="$BENCH_COLS" \
    '{ sub(/\r$/, "") } NR == 1 { print $0 "," c; next } { print $0 "," o "," d }' "$1"
}

# ---------------------------------------------------------------- the CSVs
# bench_results_header: the trainers' CSV header (RESULTS_HEADER in common/results.h, as
# scripts/partrain.py reads it)
bench_results_header() {
  sed -n '/#define RESULTS_HEADER/,/[^\\]$/p' common/results.h | grep -o '"[^"]*"' | tr -d '"\n'
}
# bench_check_csv CSV: before any run, exit 2 (with the reason) unless CSV is missing,
# empty, or headed by the trainers' schema (with or without BENCH_COLS); its directory is
# created
bench_check_csv() {
  local h schema
  mkdir -p "$(dirname "$1")"
  [ -s "$1" ] || return 0
  h=$(head -n 1 "$1") schema=$(bench_results_header)
  [ "$h" = "$schema" ] || [ "$h" = "$schema,$BENCH_COLS" ] ||
    die "$1: not a results CSV of this version (its header: $(cut -c1-60 <<<"$h")...): move it away or give another --csv"
}
# bench_check_bounds CSV: before any run, exit 2 (with the reason) unless CSV, which
# bench_tables.py --bounds rewrites whole after the runs, is missing, empty, or headed by
# its BOUNDS_HEADER: a file of the user's own in its place is never overwritten
bench_check_bounds() {
  local h want
  [ -s "$1" ] || return 0
  want=$("$PY" -c 'import sys; sys.path.insert(0, "scripts"); import bench_tables; print(bench_tables.BOUNDS_HEADER)') ||
    die "cannot read BOUNDS_HEADER from scripts/bench_tables.py"
  h=$(head -n 1 "$1")
  [ "$h" = "$want" ] ||
    die "$1: not a bounds CSV of this suite (its header: $(cut -c1-60 <<<"$h")...): move it away or give another --csv"
}
# bench_append NEW CSV: NEW's rows (header: the trainers' schema plus BENCH_COLS) appended
# to CSV (append_rows). A CSV written before those columns (its header: the schema alone)
# gets them first, empty on its old rows, with one line on stderr; a CSV with any other
# header is left alone: exit 2 with the reason.
bench_append() {
  local new old
  new=$(head -n 1 "$1")
  if [ -s "$2" ] && old=$(head -n 1 "$2") && [ "$old" != "$new" ]; then
    if [ "$old,$BENCH_COLS" = "$new" ]; then
      BENCH_PENDING=$2.tmp.$$
      awk -v c="$BENCH_COLS" '{ sub(/\r$/, "") } NR == 1 { print $0 "," c; next } { print $0 ",," }' "$2" >"$BENCH_PENDING" &&
        mv -f "$BENCH_PENDING" "$2" || return 1
      BENCH_PENDING=""
      echo "$BENCH_NAME: $2: added the columns $BENCH_COLS (empty on its $(( $(wc -l <"$2") - 1 )) old rows)" >&2
    else
      echo "$BENCH_NAME: $2: its header is not this run's (the trainers' schema plus $BENCH_COLS): not appending to it (move it away or give another --csv)" >&2
      exit 2
    fi
  fi
  append_rows "$1" "$2"
}
# append_rows NEW CSV: the rows of NEW (a CSV with its header) appended to CSV; the old file
# plus the rows go to a temporary file next to it, renamed over it, so an interrupted run
# leaves CSV as it was, never half-written
append_rows() {
  BENCH_PENDING=$2.tmp.$$
  { if [ -s "$2" ]; then cat "$2"; tail -n +2 "$1"; else cat "$1"; fi; } >"$BENCH_PENDING" &&
    mv -f "$BENCH_PENDING" "$2" || return 1
  BENCH_PENDING=""
}

# ---------------------------------------------------------------- the sweep lists
# Every sweep's lists come from here, so a 2-core laptop and a 128-core node get sweeps
# that fit them. C, the cores of one node: --cores N, else $PARTRAIN_CORES, else under
# Slurm (SLURM_JOB_ID set) $SLURM_CPUS_ON_NODE, else nproc. Ranks may span nodes: R, the
# slots, is $SLURM_NTASKS under Slurm, else the sum of slots=N of --hostfile FILE
# ($PARTRAIN_HOSTFILE; OpenMPI's "host slots=N" lines, a line without slots= counts 1),
# else C. --cores changes the lists and the words only: what runs oversubscribed
# (OMP_WAIT_POLICY=passive, mpirun --oversubscribe) is still decided by the real nproc.
#   threads  sweep_list C    powers of two below C, C, and 2C (one oversubscribed point)
#   ranks    sweep_list R    the same up to R
#   grid     grid_list C 12  P x T points with P*T <= 2C, P and T powers of two (or C, 2C),
#            at most 12, chosen in this order (a point and its mirror together): 1x1,
#            1xC and Cx1, the points with P*T = C, the points with P*T = 2C (each class
#            the squarest first), then the rest, squarest first
#   pairs    grid_list C 12 pairs   hybrid-bench's: 1x1, every P*T = C point, the squarest
#            P*T = 2C point (and its mirror)
# --quick and --smoke (sweep_setup quick|smoke) cap every list: threads and ranks at most
# 4 points (1, the largest point below the maximum, the maximum, twice it), the grid and
# the pairs at most 6 points; --smoke keeps the whole threads list (threads cost no
# start-up; ranks do). --threads-list L, --ranks-list L, --grid L replace a list.
SWEEP_CORES_OPT="" SWEEP_HOSTFILE="" SWEEP_THREADS_OPT="" SWEEP_RANKS_OPT="" SWEEP_GRID_OPT=""
SWEEP_CORES="" SWEEP_SLOTS="" SWEEP_NODES="" SWEEP_SOURCE=""
SWEEP_THREADS="" SWEEP_RANKS="" SWEEP_GRID="" SWEEP_PAIRS=""
# The bounds: T at most 256 (the trainers' --threads maximum), so C (--cores,
# PARTRAIN_CORES) at most 256 too, and P at most 65536 (scripts/mpirun.sh's); a list point
# above its bound (2C above 256, 2R above 65536) is left out of the derived lists.
SWEEP_MAX_THREADS=256 SWEEP_MAX_RANKS=65536
# shellcheck disable=SC2071  # equal lengths of digits: compared as strings
sweep_bound() {   # WHAT N MAX WHY: die unless N <= MAX (N: digits, any length)
  [ ${#2} -lt ${#3} ] || { [ ${#2} = ${#3} ] && [[ ! $2 > $3 ]]; } || die "$1: at most $3 ($4), got $2"
}
# sweep_option OPT VALUE: OPT one of --cores, --hostfile, --threads-list, --ranks-list,
# --grid, checked at once (die: one line, exit 2); status 1 for any other OPT
sweep_option() {
  case $1 in
    --cores) [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--cores: not a positive integer: '$2'"
             sweep_bound --cores "$2" $SWEEP_MAX_THREADS "the trainers' --threads maximum"; SWEEP_CORES_OPT=$2 ;;
    --hostfile) [ -f "$2" ] && [ -r "$2" ] || die "--hostfile: cannot read '$2'"; SWEEP_HOSTFILE=$2 ;;
    --threads-list|--ranks-list)
      [[ $2 =~ ^[1-9][0-9]{0,5}(,[1-9][0-9]{0,5})*$ ]] || die "$1: expected positive integers like 1,2,8: '$2'"
      for x in ${2//,/ }; do
        if [ "$1" = --threads-list ]; then sweep_bound "$1" "$x" $SWEEP_MAX_THREADS "the trainers' --threads maximum"
        else sweep_bound "$1" "$x" $SWEEP_MAX_RANKS "scripts/mpirun.sh's maximum"; fi
      done
      if [ "$1" = --threads-list ]; then SWEEP_THREADS_OPT=${2//,/ }; else SWEEP_RANKS_OPT=${2//,/ }; fi ;;
    --grid) [[ $2 =~ ^[1-9][0-9]{0,5}x[1-9][0-9]{0,5}(,[1-9][0-9]{0,5}x[1-9][0-9]{0,5})*$ ]] ||
              die "--grid: expected PxT pairs of positive integers like 1x8,2x4,8x1: '$2'"
            for x in ${2//,/ }; do
              sweep_bound "--grid $x: P" "${x%x*}" $SWEEP_MAX_RANKS "scripts/mpirun.sh's maximum"
              sweep_bound "--grid $x: T" "${x#*x}" $SWEEP_MAX_THREADS "the trainers' --threads maximum"
            done
            SWEEP_GRID_OPT=${2//,/ } ;;
    *) return 1 ;;
  esac
}
# hostfile_slots FILE: "SLOTS HOSTS" of an OpenMPI hostfile (comments and blank lines
# skipped); die when a line's slots= is not a positive integer or no host is named
hostfile_slots() {
  local out
  out=$(awk '{ sub(/#.*/, "") } NF == 0 { next }
    { n = 1; for (i = 2; i <= NF; i++) if ($i ~ /^(slots|max_slots|max-slots)=/ && $i !~ /^max/) {
        n = substr($i, index($i, "=") + 1); if (n !~ /^[1-9][0-9]*$/) { bad = NR; exit } }
      s += n; h++ }
    END { if (bad) print "bad " bad; else if (h) print s, h; else print "none" }' "$1") || die "--hostfile: cannot read '$1'"
  case $out in
    bad*) die "--hostfile: $1 line ${out#bad }: slots= must be a positive integer" ;;
    none) die "--hostfile: $1 names no host" ;;
  esac
  echo "$out"
}
# machine_cores: C as derived above (the real core count is nproc, always)
machine_cores() {
  if [ -n "$SWEEP_CORES_OPT" ]; then echo "$SWEEP_CORES_OPT"
  elif [ -n "${PARTRAIN_CORES:-}" ]; then
    [[ $PARTRAIN_CORES =~ ^[1-9][0-9]*$ ]] || die "PARTRAIN_CORES: not a positive integer: '$PARTRAIN_CORES'"
    sweep_bound PARTRAIN_CORES "$PARTRAIN_CORES" $SWEEP_MAX_THREADS "the trainers' --threads maximum"
    echo "$PARTRAIN_CORES"
  elif [ -n "${SLURM_JOB_ID:-}" ] && [[ ${SLURM_CPUS_ON_NODE:-} =~ ^[1-9][0-9]*$ ]]; then echo "$SLURM_CPUS_ON_NODE"
  else nproc
  fi
}
# sweep_list MAX [quick [BOUND]]: "1 2 4 ... MAX 2MAX" (see above), no point above BOUND
sweep_list() {
  local max=$1 p=1 out=() x
  while [ $p -lt "$max" ]; do out+=("$p"); p=$((p * 2)); done
  out+=("$max" $((2 * max)))
  if [ "${2:-}" = quick ] && [ ${#out[@]} -gt 4 ]; then out=(1 "${out[-3]}" "$max" $((2 * max))); fi
  for x in "${out[@]}"; do if [ "$x" -le "${3:-$x}" ]; then echo "$x"; fi; done | paste -sd' '
}
# grid_list C CAP [pairs]: the grid (or hybrid-bench's pairs) as "PxT ..." sorted by P, T
grid_list() {
  awk -v c="$1" 'BEGIN {
      for (p = 1; p <= 2 * c; p *= 2) seen[p] = 1
      seen[c] = 1; seen[2 * c] = 1
      for (p in seen) for (t in seen) {
        p += 0; t += 0
        if (p * t > 2 * c) continue
        cls = (p == 1 && t == 1) ? 0 : ((p == 1 && t == c) || (p == c && t == 1)) ? 1 : \
              (p * t == c) ? 2 : (p * t == 2 * c) ? 3 : 4
        printf "%d %.6f %d %d %d\n", cls, (p > t ? p / t : t / p), -p * t, p, t
      } }' | sort -k1,1n -k2,2g -k3,3n -k4,4n |
  awk -v cap="$2" -v kind="${3:-grid}" '
    { k = $1 " " ($4 < $5 ? $4 "x" $5 : $5 "x" $4)
      if (!(k in size)) { order[++n] = k; cls[k] = $1 }
      pts[k] = pts[k] " " $4 "x" $5; size[k]++ }
    END { for (i = 1; i <= n; i++) {
            k = order[i]
            if (kind == "pairs" && (cls[k] == 4 || (cls[k] == 3 && took3))) continue
            if (taken + size[k] > cap) continue
            taken += size[k]; if (cls[k] == 3) took3 = 1
            m = split(pts[k], a, " "); for (j = 1; j <= m; j++) print a[j] } }' |
  sort -t x -k1,1n -k2,2n | paste -sd' '
}
# the P x T points of stdin within the bounds (T <= 256, P <= 65536)
sweep_grid_bound() {
  tr ' ' '\n' | awk -F x -v t=$SWEEP_MAX_THREADS -v p=$SWEEP_MAX_RANKS 'NF == 2 && $1 <= p && $2 <= t' | paste -sd' '
}
# sweep_setup [full|quick|smoke]: C, R and the nodes (SWEEP_CORES, SWEEP_SLOTS,
# SWEEP_NODES; SWEEP_SOURCE says where C came from) and the lists SWEEP_THREADS,
# SWEEP_RANKS, SWEEP_GRID, SWEEP_PAIRS (space-separated; options replace them)
sweep_setup() {
  local mode=${1:-full} cap=() gcap=12 hf=${SWEEP_HOSTFILE:-${PARTRAIN_HOSTFILE:-}} s h
  SWEEP_CORES=$(machine_cores) || exit 2   # its die: the line is on stderr already
  if [ -n "$SWEEP_CORES_OPT" ]; then SWEEP_SOURCE="--cores"
  elif [ -n "${PARTRAIN_CORES:-}" ]; then SWEEP_SOURCE=PARTRAIN_CORES
  elif [ -n "${SLURM_JOB_ID:-}" ] && [[ ${SLURM_CPUS_ON_NODE:-} =~ ^[1-9][0-9]*$ ]]; then SWEEP_SOURCE=SLURM_CPUS_ON_NODE
  else SWEEP_SOURCE=nproc
  fi
  SWEEP_SLOTS=$SWEEP_CORES SWEEP_NODES=1
  if [ -n "${SLURM_JOB_ID:-}" ] && [[ ${SLURM_NTASKS:-} =~ ^[1-9][0-9]*$ ]]; then
    SWEEP_SLOTS=$SLURM_NTASKS
    SWEEP_NODES=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}
    [[ $SWEEP_NODES =~ ^[1-9][0-9]*$ ]] || SWEEP_NODES=1
  elif [ -n "$hf" ]; then
    [ -f "$hf" ] && [ -r "$hf" ] || die "--hostfile: cannot read '$hf'"
    s=$(hostfile_slots "$hf") || exit 2   # its die: the line is on stderr already
    read -r s h <<<"$s"
    [[ $s =~ ^[0-9]+$ ]] || s=99999999999   # awk's 1e+20: above any bound
    sweep_bound "--hostfile: $hf's slots" "$s" $SWEEP_MAX_RANKS "scripts/mpirun.sh's maximum"
    SWEEP_SLOTS=$s SWEEP_NODES=$h
  fi
  [ "$mode" = full ] || { cap=(quick); gcap=6; }
  if [ "$mode" = smoke ]; then SWEEP_THREADS=$(sweep_list "$SWEEP_CORES" full $SWEEP_MAX_THREADS)
  else SWEEP_THREADS=$(sweep_list "$SWEEP_CORES" "${cap[0]:-full}" $SWEEP_MAX_THREADS); fi
  SWEEP_RANKS=$(sweep_list "$SWEEP_SLOTS" "${cap[0]:-full}" $SWEEP_MAX_RANKS)
  SWEEP_GRID=$(grid_list "$SWEEP_CORES" $gcap | sweep_grid_bound)
  SWEEP_PAIRS=$(grid_list "$SWEEP_CORES" $gcap pairs | sweep_grid_bound)
  [ -z "$SWEEP_THREADS_OPT" ] || SWEEP_THREADS=$SWEEP_THREADS_OPT
  [ -z "$SWEEP_RANKS_OPT" ] || SWEEP_RANKS=$SWEEP_RANKS_OPT
  [ -z "$SWEEP_GRID_OPT" ] || SWEEP_GRID=$SWEEP_GRID_OPT SWEEP_PAIRS=$SWEEP_GRID_OPT
}
# commas LIST: "1 2 4" -> "1,2,4"; words LIST: "1 2 4" -> "1, 2, 4"
commas() { local a; read -r -a a <<<"$1"; local IFS=,; echo "${a[*]}"; }
words() { commas "$1" | sed 's/,/, /g'; }
