# bench/lib.sh — what every benchmark script repeats (sourced, after `cd` to the repository
# root and `set -euo pipefail`; run_all.sh, scripts/*.sh, the Makefile and the tests source
# it for PARTRAIN_PYTHON and the variant lists):
#   PARTRAIN_PYTHON   the Python interpreter of every PyTorch run and every script, chosen
#                     here only: Debian's /usr/bin/python3, the one that sees python3-torch
#                     (override: PARTRAIN_PYTHON=/path/to/python3 in the environment)
#   LOCK              the benchmark lock every timed run holds (flock)
#   bench_usage       the calling script's header comment as its --help
#   die MSG           "NAME: MSG" on stderr, exit 2 (NAME: the script's name without .sh)
#   need_value OPT "$@"   a usage error unless OPT has a non-empty value
#   need_tools T...   die unless every tool T is installed (with its Debian package)
#   need_built B...   die unless every program B is built
#   variant_table PROG, variant_names PROG, variant_flags PROG NAME, load_variants PROG
#                     PROG's variants, from `PROG --list-variants` (NAME<TAB>FLAGS<TAB>DESCRIPTION)
#   cpu_ticks, wait_idle LIMIT WINDOW PCT    the idle check of a shared machine
#   idle_or_busy LIMIT WINDOW PCT   wait_idle that says once "the machine is busy" (BENCH_BUSY)
#   bench_run LABEL CMD...   one timed run under the lock, its summary line shown
#   append_rows NEW CSV       NEW's rows appended to CSV atomically (header once)
#   utc_now           the time in the CSVs' timestamp format
# Shell only; no global state beyond the variables named here and BENCH_*.
# shellcheck shell=bash
# shellcheck disable=SC2034  # PY, VARIANT_FLAGS, BENCH_*: for the scripts that source this

PARTRAIN_PYTHON=${PARTRAIN_PYTHON:-/usr/bin/python3}
export PARTRAIN_PYTHON
PY=$PARTRAIN_PYTHON
LOCK=/tmp/partrain-bench.lock
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
# cpu_ticks: "BUSY TOTAL" jiffies of all CPUs (/proc/stat; iowait is neither busy nor idle)
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
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
# idle_or_busy LIMIT WINDOW PCT: wait_idle, but never a reason to stop: when the machine
# does not get idle, the benchmark measures anyway. The first time, one line on stderr
#   bench: the machine is busy (N% of a core of outside load); measuring anyway, rows marked disturbed
# and BENCH_BUSY=1; from then on each wait is one WINDOW (the machine may calm down).
# Status 0 when the machine was idle, 1 when busy (for `if`; never fatal under set -e
# when used as `idle_or_busy ... || true` or in a condition).
BENCH_BUSY=0
idle_or_busy() {
  local limit=$1
  [ "$BENCH_BUSY" = 0 ] || limit=$2
  wait_idle "$limit" "$2" "$3" && return 0
  if [ "$BENCH_BUSY" = 0 ]; then
    BENCH_BUSY=1
    echo "bench: the machine is busy ($(( (100 - BENCH_IDLE) * $(nproc) ))% of a core of outside load); measuring anyway, rows marked disturbed" >&2
  fi
  return 1
}

# ---------------------------------------------------------------- one timed run
# bench_run LABEL CMD...: CMD under the benchmark lock (BENCH_WAIT, if set, is run inside
# the lock first: an idle check); its output in BENCH_OUT. A failure prints the output and
# "NAME: run k/total (LABEL) failed" and exits 1; otherwise the line
#   [k/total] LABEL  SUMMARY
# (BENCH_TOTAL runs in all; LABEL padded to BENCH_WIDTH; SUMMARY: the output's last line,
# cut to BENCH_CUT characters). BENCH_K counts the runs.
BENCH_K=0 BENCH_TOTAL=0 BENCH_WIDTH=22 BENCH_CUT=150 BENCH_WAIT="" BENCH_OUT=""
bench_run() {
  local label=$1 rc=0; shift
  BENCH_K=$((BENCH_K + 1))
  exec 9>>"$LOCK"
  flock 9                      # no other benchmark runs meanwhile
  [ -z "$BENCH_WAIT" ] || $BENCH_WAIT
  BENCH_OUT=$("$@" 9>&- 2>&1) || rc=$?
  flock -u 9
  exec 9>&-
  if [ $rc -ne 0 ]; then
    printf '%s\n' "$BENCH_OUT" >&2
    echo "$BENCH_NAME: run $BENCH_K/$BENCH_TOTAL ($label) failed" >&2
    exit 1
  fi
  printf "[%d/%d] %-${BENCH_WIDTH}s %s\n" "$BENCH_K" "$BENCH_TOTAL" "$label" \
    "$(printf '%s\n' "$BENCH_OUT" | tail -n 1 | cut -c1-"$BENCH_CUT")"
}

# append_rows NEW CSV: the rows of NEW (a CSV with its header) appended to CSV; the old file
# plus the rows go to a temporary file next to it, renamed over it, so an interrupted run
# leaves CSV as it was, never half-written
append_rows() {
  { if [ -s "$2" ]; then cat "$2"; tail -n +2 "$1"; else cat "$1"; fi; } >"$2.tmp.$$" && mv -f "$2.tmp.$$" "$2"
}
