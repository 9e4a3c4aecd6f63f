# tests/runall-fake-step.sh — a step for the tests of run_all.sh's driver, not a group of
# the suite: run_all.sh sources it when PARTRAIN_EXTRA_STEPS names it. Its group "fake"
# has one step, fake-rows, which appends one row every 0.2 s for PARTRAIN_TEST_FAKE_STEP
# seconds to fake.csv from a child process and notes its process group in its log
# (tests/test_runall_faults.sh).
# shellcheck shell=bash
# shellcheck disable=SC2154  # log, results, selected, step: run_all.sh's
ALL_GROUPS+=(fake)
fake_rows() {
  echo "pgid $(ps -o pgid= -p $BASHPID | tr -d ' ')" >>"$log"
  bash -c 'echo id,value; for ((i = 1; i <= $1 * 5; i++)); do echo "$i,x"; sleep 0.2; done' fake "$PARTRAIN_TEST_FAKE_STEP" >>"$results/fake.csv"
}
extra_steps() {
  [[ " ${selected[*]} " == *" fake "* ]] || return 0
  step fake-rows "10 5 2" fake.csv fake_rows "fake: one row every 0.2 s for ${PARTRAIN_TEST_FAKE_STEP:-0} s (a test hook) -> $results/fake.csv"
}
