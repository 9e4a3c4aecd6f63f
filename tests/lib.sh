# tests/lib.sh — helpers for partrain's shell tests (sourced). Prints PASS/FAIL/SKIP lines.
TMP=$(mktemp -d /tmp/partrain-test-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
FAILS=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; FAILS=$((FAILS + 1)); }
skip() { echo "SKIP $1: $2"; }
check() { local name=$1 detail=$2; shift 2; if "$@"; then pass "$name"; else fail "$name" "$detail"; fi; }
# csv_col FILE COLUMN [ROW]: value of a column (by header name) in data row ROW (default: last)
csv_col() {
  awk -F, -v col="$2" -v row="${3:-0}" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
    { v[NR - 1] = $c; n = NR - 1 } END { print (row > 0 ? v[row] : v[n]) }' "$1"
}
csv_rows() { [ -f "$1" ] && echo $(( $(wc -l <"$1") - 1 )) || echo 0; }
finish() { [ "$FAILS" -eq 0 ]; exit $?; }
# SLOWDOWN: the factor for the tests' hang limits (LIMIT=$((120 * SLOWDOWN))): 1, or 3 under
# make test SANITIZE=1 (PARTRAIN_SANITIZE=1, tests/run-sanitized.sh), whose ASan + UBSan
# programs run 2-3x slower than the optimized ones
SLOWDOWN=1; [ "${PARTRAIN_SANITIZE:-0}" = 1 ] && SLOWDOWN=3
# expect_error NAME KEY [--label L] COMMAND...: a bad input must end COMMAND with exit 2,
# one line on stderr (with --label L: one line starting "L: ", since mpirun adds its own
# notice) that contains KEY (a grep pattern), and no CSV written. `--csv $TMP/err.csv` is
# appended to COMMAND unless it already names --csv. Runs under timeout ${LIMIT:-120 x SLOWDOWN}.
expect_error() {
  local name=$1 key=$2 label="" a has_csv=0; shift 2
  if [ "${1:-}" = --label ]; then label=$2; shift 2; fi
  for a in "$@"; do [ "$a" = --csv ] && has_csv=1; done
  rm -f "$TMP/err.csv"
  if [ $has_csv = 1 ]; then timeout "${LIMIT:-$((120 * SLOWDOWN))}" "$@" >"$TMP/out" 2>"$TMP/err"
  else timeout "${LIMIT:-$((120 * SLOWDOWN))}" "$@" --csv "$TMP/err.csv" >"$TMP/out" 2>"$TMP/err"; fi
  local rc=$? lines
  if [ -n "$label" ]; then lines=$(grep -c "^$label: " "$TMP/err"); else lines=$(wc -l <"$TMP/err"); fi
  if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$key" "$TMP/err" && [ ! -e "$TMP/err.csv" ]; then
    pass "$name"
  else
    fail "$name" "exit $rc$([ "$rc" = 124 ] && echo ' (hung)'), $lines ${label:+'$label:' }stderr lines, csv $([ -e "$TMP/err.csv" ] && echo written || echo absent): $(head -c 300 "$TMP/err")"
  fi
}
# variants PROG: the names of PROG's variants (the first column of PROG --list-variants,
# the CSV's variant); variant_flags PROG NAME: the flags that select variant NAME
variants() { "$1" --list-variants | cut -f1; }
variant_flags() { "$1" --list-variants | awk -F'\t' -v n="$2" '$1 == n { print $2 }'; }
# sanitized PROG: the ASan + UBSan build of PROG (e.g. mpi/mpi): make test's SANITIZE=1
# build in build/sanitize/, or PROG itself when the whole suite runs sanitized
# (tests/run-sanitized.sh: there every program is)
sanitized() { if [ -n "${PARTRAIN_SANITIZE:-}" ]; then echo "$1"; else echo "build/sanitize/$1"; fi; }

# mpi_ranks PID: the pids of an MPI job's ranks, the processes below PID (scripts/mpirun.sh,
# which runs mpirun as its child, or timeout, or mpirun itself) whose environment has
# OMPI_COMM_WORLD_RANK
mpi_ranks() {
  local p c queue=("$1")
  while [ ${#queue[@]} -gt 0 ]; do
    p=${queue[0]} queue=("${queue[@]:1}")
    for c in $(pgrep -P "$p"); do
      queue+=("$c")
      tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -q '^OMPI_COMM_WORLD_RANK=' && echo "$c"
    done
  done
}
