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
