#!/usr/bin/env bash
# tests/run.sh — runs every partrain test and prints the verdict line.
#
# Each test (a C program in tests/bin/ or a tests/test_*.sh script) prints one line per
# check: "PASS name", "FAIL name: detail" or "SKIP name: reason". This script counts
# them, reports a test that died without saying FAIL, or that printed no check line at
# all, as a failure, and ends with
#   N passed, N failed[, N skipped]
# exiting non-zero if anything failed. Run from the repository root (make test does).
# PARTRAIN_SANITIZER_LOGS=DIR (tests/run-sanitized.sh, make test SANITIZE=1): the sanitizers
# write their reports into DIR (log_path); a test after which one appeared fails with it,
# and the files are moved to DIR/<test name>/. A file that holds no report (ASan's warning
# that it does not fully support swapcontext, printed by the CUDA emulation) is not one.
set -u
cd "$(dirname "$0")/.."

tests=(tests/bin/test_gemm tests/bin/test_gemm_loops tests/bin/test_serial tests/bin/test_loader tests/bin/test_results tests/test_headers.sh tests/test_cli.sh tests/test_e2e.sh tests/test_golden.sh tests/test_faults.sh tests/test_checkpoint.sh tests/test_target.sh tests/test_tta.sh tests/test_portable.sh tests/test_openmp.sh tests/test_mpi.sh tests/test_comm.sh tests/test_cluster.sh tests/bin/test_cuda tests/test_cuda.sh tests/test_gpucheck.sh tests/test_cnn.sh tests/test_hybrid.sh tests/test_watchdog.sh tests/test_run_all.sh tests/test_cores.sh tests/test_trace.sh tests/test_runall_faults.sh tests/test_scripts_faults.sh tests/test_report.sh tests/test_report_links.sh tests/test_trace_scripts.sh tests/test_model.sh)
[ $# -gt 0 ] && tests=("$@")

passed=0 failed=0 skipped=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${tests[@]}"; do
  echo "== $t"
  if [ ! -x "$t" ]; then
    echo "FAIL $t: not built or not executable"
    failed=$((failed + 1))
    continue
  fi
  start=$(date +%s)
  "$t" >"$log" 2>&1
  rc=$?
  grep -E '^(PASS|FAIL|SKIP) ' "$log" | sed 's/^/  /'
  p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); s=$(grep -c '^SKIP ' "$log")
  if [ $((p + f + s)) -eq 0 ]; then
    echo "  FAIL $t: printed no PASS, FAIL or SKIP line (exit status $rc); its output:"
    tail -n 20 "$log" | sed 's/^/    /'
    f=1
  elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "  FAIL $t: exited with status $rc without reporting a failure; its output:"
    tail -n 20 "$log" | sed 's/^/    /'
    f=1
  elif [ "$f" -gt 0 ]; then
    # show what the failing program printed besides its check lines (sanitizer reports, ...)
    grep -vE '^(PASS|SKIP) ' "$log" | grep -vE '^FAIL ' | tail -n 20 | sed 's/^/    | /'
  fi
  if [ -n "${PARTRAIN_SANITIZER_LOGS:-}" ] && [ -n "$(find "$PARTRAIN_SANITIZER_LOGS" -maxdepth 1 -type f 2>/dev/null)" ]; then
    keep=$PARTRAIN_SANITIZER_LOGS/$(basename "$t")
    mkdir -p "$keep" && find "$PARTRAIN_SANITIZER_LOGS" -maxdepth 1 -type f -exec mv {} "$keep/" \;
    reports=$(grep -lE 'ERROR: |runtime error' "$keep"/* 2>/dev/null)
    if [ -n "$reports" ]; then
      echo "  FAIL $t: sanitizer reports ($(wc -l <<<"$reports") in $keep); the first:"
      grep -m 12 -E 'ERROR|SUMMARY|runtime error|#[0-9]+ ' "$(head -n 1 <<<"$reports")" | sed 's/^/    | /'
      f=$((f + 1))
    fi
  fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  echo "  ($(( $(date +%s) - start )) s)"
done

line="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && line="$line, $skipped skipped"
echo "$line"
[ "$failed" -eq 0 ]
