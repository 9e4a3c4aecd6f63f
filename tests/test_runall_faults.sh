#!/usr/bin/env bash
# tests/test_runall_faults.sh — runs that must not be lost or duplicated (run_all.sh), and
# benchmarks that must not die silently on a busy machine (issue 19, kinds 5 and 6).
#
# run_all.sh runs with the test hook PARTRAIN_EXTRA_STEPS=tests/runall-fake-step.sh and
# PARTRAIN_TEST_FAKE_STEP=S: the group "fake", whose one step fake-rows appends a row to fake.csv every 0.2 s for S seconds from a child process
# and writes "pgid N" (its process group) in its log; one complete run: 1 header + 5*S rows.
#   1. Two run_all.sh on one --results directory: the second exits 2 at once with
#      "DIR is in use by another run_all.sh (pid N)" (one line), the lock stays the first's; the
#      first finishes with the rows of one run, not duplicated.
#   2. run_all.sh killed by SIGHUP mid-step (a step of 8 s): exit 129, no process of the
#      step's group left within 5 s, no partial fake.csv in DIR; a rerun (2 s) ends with
#      exactly the rows of one complete run.
#   3. The same with SIGKILL of run_all.sh (nothing can trap it): the step's group is gone
#      within 5 s (run_all.sh's watcher), nothing partial in DIR, the rerun is exact.
#   4. --only "" lists the same steps as no --only (--list-steps).
#   5. A --results directory that cannot be created, or is read-only (immutable for root):
#      one line on stderr, exit 2.
#   6. bench/openmp-bench.sh, mpi-bench.sh, hybrid-bench.sh (and cnn-bench.sh when PyTorch
#      is there), at their smallest settings, each with a busy loop pinned to the last core
#      (taskset) for its whole run: exit 0, "the machine is busy" once, every run measured,
#      its row marked disturbed=1 (other_load_cores > 0.05) and its line "[disturbed]".
#      Whether a quiet machine leaves the rows unmarked is not checked (SKIP): other jobs
#      share the machines this runs on, so no run can be promised a quiet one.
#   7. Every bench/*.sh that exits non-zero says why: an unknown option gives one line
#      "NAME: unknown ..." and exit 2; a failing trainer run (more --train than the data
#      holds) the trainer's reason and "NAME: run 1/N (LABEL) failed (exit 2)" last, exit 1,
#      no CSV; any other failing command (openmp-bench --report-only whose table script
#      fails) one line from the ERR trap, "NAME: line L: COMMAND failed (exit S)".
# About 2-3 minutes on 2 cores.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
. scripts/lib.sh    # PARTRAIN_PYTHON
PY=$PARTRAIN_PYTHON
RA=./run_all.sh
export PARTRAIN_EXTRA_STEPS=tests/runall-fake-step.sh   # the group "fake" (not run_all's)
export PARTRAIN_TEST_FAKE_STEP=2    # 10 rows in 2 s
ROWS=11                             # the header and 10 rows
command -v flock >/dev/null || { skip "run_all faults" "flock missing (apt-get install util-linux)"; finish; }

FAKE=("$RA" --smoke --no-setup --only fake --results)   # + DIR: a fake run (in the
# background as "${FAKE[@]}" DIR &, so that $! is run_all.sh itself, not a subshell)
step_pgid() { sed -n 's/^pgid //p' "$1/logs/fake-rows.log" 2>/dev/null | tail -n 1; }
wait_row() {   # DIR: until the fake step has written a row into its staging file (60 s:
  # the set-up before it, PyTorch's import, takes seconds on a loaded machine)
  for _ in $(seq 1 $((600 * SLOWDOWN))); do
    [ "$(cat "$1"/.partial/fake-rows/fake.csv 2>/dev/null | wc -l)" -ge 3 ] && return 0
    sleep 0.1
  done
  return 1
}
group_gone() {   # PGID: no process left in the group within 5 s
  [ -n "$1" ] || return 1
  for _ in $(seq 1 25); do pgrep -g "$1" >/dev/null || return 0; sleep 0.2; done
  return 1
}
lock_free() {   # DIR: until run_all's lock is free (the watcher lets it go last), 6 s
  for _ in $(seq 1 30); do flock -n "$1/.lock" true && return 0; sleep 0.2; done
  return 1
}

# ---- 1. two run_all.sh on one directory
D=$TMP/two
"${FAKE[@]}" "$D" >"$TMP/first.out" 2>&1 & first=$!
if wait_row "$D"; then
  second_rc=0; "${FAKE[@]}" "$D" >"$TMP/second.out" 2>"$TMP/second.err" || second_rc=$?
  check "run_all: a second run_all.sh on the same --results exits 2 at once, one line" \
    "exit $second_rc, stderr: $(head -c 300 "$TMP/second.err"), stdout: $(head -c 200 "$TMP/second.out")" \
    eval '[ $second_rc = 2 ] && [ "$(wc -l <"$TMP/second.err")" = 1 ] && [ ! -s "$TMP/second.out" ] &&
          grep -q "$D is in use by another run_all.sh (pid $first)" "$TMP/second.err"'
  check "run_all: the second run_all.sh left the lock to the first (its pid in DIR/.lock)" "$(cat "$D/.lock")" \
    [ "$(cat "$D/.lock")" = "$first" ]
else
  fail "run_all: a second run_all.sh on the same --results" "the first run wrote no row in 60 s: $(tail -n 3 "$TMP/first.out")"
fi
wait "$first"; first_rc=$?
check "run_all: the first run finishes with the rows of one run" "exit $first_rc, $(wc -l <"$D/fake.csv" 2>&1) lines in fake.csv" \
  eval '[ $first_rc = 0 ] && [ "$(wc -l <"$D/fake.csv")" = $ROWS ]'

# ---- 2, 3. run_all.sh killed mid-step by SIGHUP, by SIGKILL; then rerun
for sig in HUP KILL; do
  D=$TMP/kill-$sig
  # a long step (8 s), so that only the kill can end it within group_gone's 5 s
  PARTRAIN_TEST_FAKE_STEP=8 "${FAKE[@]}" "$D" >"$TMP/k.out" 2>&1 & ra=$!
  if ! wait_row "$D"; then
    fail "run_all killed by SIG$sig" "the step wrote no row in 60 s: $(tail -n 3 "$TMP/k.out")"; kill "$ra"; wait "$ra"; continue
  fi
  pg=$(step_pgid "$D")
  kill -"$sig" "$ra"; wait "$ra" 2>/dev/null; rc=$?
  [ $sig = HUP ] && check "run_all: SIGHUP mid-step exits 129 with 'interrupted at step'" "exit $rc: $(tail -n 2 "$TMP/k.out")" \
    eval '[ $rc = 129 ] && grep -q "SIGHUP: interrupted at step 1/" "$TMP/k.out"'
  check "run_all: after SIG$sig of run_all no process of the step (group ${pg:-?}) survives" \
    "still running: $(pgrep -g "${pg:-0}" -a 2>/dev/null | head -c 300)" group_gone "$pg"
  sleep 0.5   # a stray writer would add rows meanwhile
  check "run_all: after SIG$sig no partial rows in the results directory" \
    "$(ls -a "$D"; cat "$D/fake.csv" 2>/dev/null | wc -l) lines in fake.csv" [ ! -e "$D/fake.csv" ]
  lock_free "$D"
  rc=0; "${FAKE[@]}" "$D" >"$TMP/k2.out" 2>&1 || rc=$?
  check "run_all: the rerun after SIG$sig ends with exactly the rows of one complete run" \
    "exit $rc, $(wc -l <"$D/fake.csv" 2>&1) lines (want $ROWS): $(tail -n 2 "$TMP/k2.out")" \
    eval '[ $rc = 0 ] && [ "$(wc -l <"$D/fake.csv")" = $ROWS ] && [ "$(cut -d, -f1 "$D/fake.csv" | sort | uniq -d)" = "" ]'
done

# ---- 4. --only "" is no --only
unset PARTRAIN_TEST_FAKE_STEP
a=$("$RA" --list-steps --only "" 2>&1); arc=$?
b=$("$RA" --list-steps 2>&1)
check "run_all --only \"\": the same steps as no --only" "exit $arc; '$a' vs '$b'" \
  eval '[ $arc = 0 ] && [ "$a" = "$b" ] && [ "$(wc -l <<<"$a")" -gt 2 ]'

# ---- 5. a results directory that cannot be created or written
one_line_exit2() {   # NAME DIR
  local rc=0
  "$RA" --smoke --no-setup --only serial --results "$2" >"$TMP/ro.out" 2>"$TMP/ro.err" || rc=$?
  check "$1" "exit $rc, stderr: $(head -c 300 "$TMP/ro.err"), stdout: $(head -c 100 "$TMP/ro.out")" \
    eval '[ $rc = 2 ] && [ "$(wc -l <"$TMP/ro.err")" = 1 ] && grep -q "^run_all: .*results directory" "$TMP/ro.err" && [ ! -s "$TMP/ro.out" ]'
}
touch "$TMP/plainfile"
one_line_exit2 "run_all: an uncreatable --results (under a file): one line, exit 2" "$TMP/plainfile/results"
mkdir -p "$TMP/ro"
if [ "$(id -u)" != 0 ]; then
  chmod 555 "$TMP/ro"
  one_line_exit2 "run_all: a read-only --results: one line, exit 2" "$TMP/ro"
  chmod 755 "$TMP/ro"
elif chattr +i "$TMP/ro" 2>/dev/null; then
  one_line_exit2 "run_all: a read-only (immutable) --results: one line, exit 2" "$TMP/ro"
  chattr -i "$TMP/ro"
else
  skip "run_all: a read-only --results" "root, and chattr +i is not permitted here"
fi
one_line_exit2 "run_all: a --results on a read-only file system: one line, exit 2" /proc/partrain-results

# ---- 6. benchmarks on a busy machine
# busy_bench NAME CMD...: CMD (a benchmark at its smallest settings; + --csv FILE) with a
# busy loop pinned to the last core for its whole run: exit 0, "the machine is busy" once
# on stderr, and every trainer run it reports ("[k/N] ... | ...") has its row in the CSV,
# marked disturbed=1 with other_load_cores above 0.05, and "[disturbed]" on its line
busy_bench() {
  local name=$1 csv rc=0 n_busy runs lines marked n d o; shift
  csv=$TMP/busy-$(basename "$name" .sh).csv
  ( trap 'kill $busy 2>/dev/null' EXIT
    timeout 300 taskset -c $(( $(nproc) - 1 )) sh -c 'while :; do :; done' & busy=$!
    "$@" --csv "$csv" >"$TMP/busy.out" 2>"$TMP/busy.err"
  ) || rc=$?
  n_busy=$(grep -c '^bench: the machine is busy ([0-9]*% of a core of outside load); measuring anyway, rows marked disturbed$' "$TMP/busy.err")
  check "$name on a busy machine: exit 0, says it is busy once" \
    "exit $rc, $n_busy busy lines; stderr: $(tail -c 300 "$TMP/busy.err")" eval '[ $rc = 0 ] && [ $n_busy = 1 ]'
  # (the C serial copies at once of the per-round core bound, "[k/N] serial xC at once", give no row)
  runs=$(grep -E '^\[[0-9]+/[0-9]+\] .*: .*\| ' "$TMP/busy.out" | grep -vc '^\[[0-9/]*\] serial x[0-9]* at once ')
  lines=$(grep -E '^\[[0-9]+/[0-9]+\] .*: .*\| ' "$TMP/busy.out" | grep -v '^\[[0-9/]*\] serial x[0-9]* at once ' | grep -c '\[disturbed\]$')
  marked=$("$PY" - "$csv" <<'PY' 2>&1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(len(rows), sum(r.get("disturbed") == "1" for r in rows), sum(float(r.get("other_load_cores") or 0) > 0.05 for r in rows))
PY
)
  # shellcheck disable=SC2034  # d, o: read in the check below
  read -r n d o <<<"$marked"
  check "$name on a busy machine: every run measured, its row marked disturbed" \
    "$runs runs reported, $lines lines marked; rows, disturbed, other load > 0.05: $marked" \
    eval '[ "$runs" -ge 1 ] && [ "$lines" = "$runs" ] && [ "${n:-0}" = "$runs" ] && [ "$d" = "$n" ] && [ "$o" = "$n" ]'
}
if [ -x serial/serial ] && [ -x openmp/openmp ] && [ -d data/mnist ] && command -v taskset >/dev/null; then
  busy_bench bench/openmp-bench.sh bench/openmp-bench.sh --data data/mnist --train 1000 --epochs 1 --runs 1 --batches 64 \
    --threads 1 --no-torch --tries 2 --idle-wait 2
  if command -v mpirun >/dev/null && [ -x mpi/mpi ] && [ -x hybrid/hybrid ]; then
    busy_bench bench/mpi-bench.sh bench/mpi-bench.sh --data data/mnist --train 1000 --epochs 2 --runs 1 --batches 64
    busy_bench bench/hybrid-bench.sh bench/hybrid-bench.sh --data data/mnist --train 1000 --epochs 2 --runs 1 --batches 64
  else
    skip "bench/mpi-bench.sh, bench/hybrid-bench.sh on a busy machine" "mpirun, mpi/mpi or hybrid/hybrid missing (make all)"
  fi
  if [ -x cnn/cnn ] && command -v mpirun >/dev/null && "$PY" -c 'import torch' 2>/dev/null; then
    busy_bench bench/cnn-bench.sh bench/cnn-bench.sh --data data/mnist --train 500 --epochs 2 --runs 1
  else
    skip "bench/cnn-bench.sh on a busy machine" "cnn/cnn, mpirun or PyTorch ($PY) missing; hybrid-bench covers the MPI x OpenMP runs"
  fi
else
  skip "benchmarks on a busy machine" "serial/serial, openmp/openmp, data/mnist or taskset missing (make all; make data)"
fi
skip "a benchmark on a quiet machine marks no row disturbed" \
  "not checkable here: other jobs share this machine, so no run can be promised a quiet machine"

# ---- 7. a benchmark that ends with a non-zero status says why, in one line
for b in bench/*.sh; do
  sname=$(basename "$b" .sh) rc=0
  "$b" --bogus >"$TMP/u.out" 2>"$TMP/u.err" || rc=$?
  check "$b --bogus: exit 2, one line '$sname: ...' on stderr" "exit $rc, stderr: $(head -c 300 "$TMP/u.err")" \
    eval '[ $rc = 2 ] && [ "$(wc -l <"$TMP/u.err")" = 1 ] && grep -q "^$sname: unknown" "$TMP/u.err" && [ ! -s "$TMP/u.out" ]'
done
# a run that fails (more training samples than data/mnist holds): exit 1, the trainer's
# reason, then "NAME: run 1/N (LABEL) failed (exit 2)" last; no CSV
fail_bench() {   # CMD...
  local rc=0
  sname=$(basename "$1" .sh)   # not "name": check's own local would hide it from the eval
  rm -f "$TMP/fail.csv"
  "$@" --data data/mnist --train 99999999 --csv "$TMP/fail.csv" >/dev/null 2>"$TMP/f.err" || rc=$?
  check "$1: a failing run: exit 1, the trainer's reason, '$sname: run 1/N (...) failed' last, no CSV" \
    "exit $rc, stderr: $(tail -c 300 "$TMP/f.err")" \
    eval '[ $rc = 1 ] && grep -q "holds only" "$TMP/f.err" && [ ! -e "$TMP/fail.csv" ] &&
          tail -n 1 "$TMP/f.err" | grep -qE "^$sname: run 1/[0-9]+ \(.*\) failed \(exit 2\)$"'
}
if [ -x serial/serial ] && [ -d data/mnist ] && command -v taskset >/dev/null; then
  fail_bench bench/openmp-bench.sh --epochs 1 --runs 1 --batches 64 --threads 1 --no-torch
  if command -v mpirun >/dev/null; then
    fail_bench bench/mpi-bench.sh --epochs 2 --runs 1 --batches 64
    fail_bench bench/hybrid-bench.sh --epochs 2 --runs 1 --batches 64
  fi
  # any other failing command: the ERR trap names it (the table script, here /bin/false)
  rc=0; PARTRAIN_PYTHON=/bin/false bench/openmp-bench.sh --report-only --csv "$TMP/busy-openmp-bench.csv" \
    >/dev/null 2>"$TMP/f.err" || rc=$?
  check "bench/openmp-bench.sh whose table script fails: exit 1, 'openmp-bench: line L: ... failed (exit 1)'" \
    "exit $rc, stderr: $(tail -c 300 "$TMP/f.err")" \
    eval '[ $rc = 1 ] && [ "$(wc -l <"$TMP/f.err")" = 1 ] && grep -qE "^openmp-bench: line [0-9]+: .*bench_tables.py.* failed \(exit 1\)$" "$TMP/f.err"'
else
  skip "a failing benchmark run says why" "serial/serial, data/mnist or taskset missing (make all; make data)"
fi
finish
