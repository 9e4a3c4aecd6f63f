#!/usr/bin/env bash
# tests/test_watchdog.sh — the stuck-rank watchdog (--timeout-step S, issue 19 item 5;
# common/watchdog.h) in every MPI trainer that is built:
#   - rank 1 (and, for mpi and pipeline, rank 0) SIGSTOPped during training with
#     --timeout-step 2: the job ends within 60 s with exit status 1, stderr has exactly one
#     watchdog line, from the lowest live rank, naming the stopped rank and its pid, no CSV
#     row is written and the stopped process does not outlive the job;
#   - a normal run with --timeout-step 1 (fast steps) ends normally: no watchdog line;
#   - --timeout-step 0: a rank stopped for 9 s is not reported, and resumed, the run ends
#     normally;
#   - a phase in which one rank keeps working (its test shard 40,000 samples, the other's
#     one) while the other waits longer than S: the roll call sees progress, no abort;
#   - steps slower than S on every rank: the "no rank has made progress" verdict, one line;
#   - bad values: one line, exit 2; --help lists the flag;
#   - authentication: forged DONE datagrams from "rank 1" (right port and format, no key)
#     while rank 1 is stopped are dropped and the watchdog fires; the socket is bound to
#     127.0.0.1, not 0.0.0.0.
# Stopped processes are resumed and killed on every exit (trap), never left behind.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
DATA=data/mnist
MPI=scripts/mpirun.sh
[ -d $DATA ] || { skip "watchdog" "data/mnist missing (make data)"; exit 0; }
command -v mpirun >/dev/null || { skip "watchdog" "mpirun not found (apt-get install openmpi-bin)"; exit 0; }

STOPPED="" JOB=""
cleanup() {
  local p
  for p in $STOPPED; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
  [ -n "$JOB" ] && kill -KILL "$JOB" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# rank_pid JOB_PID RANK: the pid of that rank (a child of the job's mpirun, OMPI_COMM_WORLD_RANK in its environment)
rank_pid() {
  local c r
  for c in $(mpi_ranks "$1"); do
    r=$(tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ "$r" = "$2" ] && { echo "$c"; return 0; }
  done
  return 1
}

# launch COMMAND...: in the background, stdout/stderr in $TMP/out, $TMP/err; JOB = its pid (scripts/mpirun.sh's)
launch() {
  rm -f "$TMP/out" "$TMP/err" "$TMP/wd.csv"
  "$@" --csv "$TMP/wd.csv" >"$TMP/out" 2>"$TMP/err" </dev/null &
  JOB=$!
}
# finish_job LIMIT: wait up to LIMIT seconds for the job; sets RC (124: still running, killed)
finish_job() {
  local limit=$1 t0 p
  t0=$(now)
  while kill -0 "$JOB" 2>/dev/null && [ "$(secs "$t0" "$(now)" | cut -d. -f1)" -lt "$limit" ]; do sleep 0.2; done
  if kill -0 "$JOB" 2>/dev/null; then
    for p in $STOPPED; do kill -CONT "$p" 2>/dev/null; done
    kill -TERM "$JOB" 2>/dev/null; sleep 2; kill -KILL "$JOB" 2>/dev/null
    wait "$JOB" 2>/dev/null
    RC=124
  else
    wait "$JOB"; RC=$?
  fi
  JOB=""
}
# wait_epoch1: until rank 0 printed its first epoch line (60 s at most); 1 if the job ended or hung
wait_epoch1() {
  local i
  for i in $(seq 300); do
    grep -q '^epoch 1/' "$TMP/out" 2>/dev/null && return 0
    kill -0 "$JOB" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}

# stop_case LABEL RANK COMMAND...: SIGSTOP rank RANK after epoch 1 (--timeout-step 2)
stop_case() {
  local label=$1 r=$2 name pid t0 el lines other live
  shift 2
  name="$label P=2: rank $r SIGSTOPped with --timeout-step 2"
  launch "$@" --timeout-step 2
  if ! wait_epoch1 || ! pid=$(rank_pid "$JOB" "$r"); then
    finish_job 5
    fail "$name" "no epoch line or no rank $r process (exit $RC): $(head -c 300 "$TMP/err")"
    return
  fi
  kill -STOP "$pid"; STOPPED="$STOPPED $pid"; t0=$(now)
  finish_job 60
  el=$(secs "$t0" "$(now)")
  live=$((1 - r))
  lines=$(grep -c "^$label: .*--timeout-step" "$TMP/err")
  other=$(grep -c "^$label: no rank has made progress" "$TMP/err")
  if [ "$RC" = 1 ] && [ "$lines" = 1 ] && [ "$other" = 0 ] &&
     grep -q "^$label: rank $r (host [^,]*, pid $pid) does not answer (stopped or hung); rank $live has made no progress" "$TMP/err"; then
    pass "$name: the job ends after ${el} s, exit 1, one line from rank $live naming rank $r and its pid"
  else
    fail "$name" "exit $RC after $el s ($([ "$RC" = 124 ] && echo hung || echo ended)), $lines watchdog lines: $(grep "^$label: " "$TMP/err" | head -c 400)"
  fi
  sleep 0.5   # mpirun has gone; the stopped rank is reaped
  local state
  state=$(ps -o stat= -p "$pid" 2>/dev/null | tr -d ' ')
  check "$name: no CSV row, the stopped process does not outlive the job" \
    "csv $([ -e "$TMP/wd.csv" ] && echo written || echo absent), pid $pid state '${state}'" \
    [ ! -e "$TMP/wd.csv" -a \( -z "$state" -o "$state" = Z \) ]
  kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null
  STOPPED=""
}

# normal_case LABEL COMMAND...: --timeout-step 1, fast steps: exit 0, a row, no watchdog line
normal_case() {
  local label=$1
  shift
  launch "$@" --timeout-step 1
  finish_job 120
  local lines
  lines=$(grep -c "^$label: .*\(does not answer\|no rank has made progress\|watchdog\)" "$TMP/err")
  check "$label P=2, --timeout-step 1, steps of milliseconds: no false alarm, the run ends normally" \
    "exit $RC, $lines watchdog lines, $(csv_rows "$TMP/wd.csv") CSV rows: $(head -c 300 "$TMP/err")" \
    [ "$RC" = 0 -a "$lines" = 0 -a "$(csv_rows "$TMP/wd.csv")" = 1 ]
}

SMALL=(--data $DATA --train 2000 --test 500)
EMU_SMALL=(--data $DATA --train 500 --test 100 --image-size 8 --hidden 16 --batch 50 --kernel naive)
progs=()
[ -x mpi/mpi ] && progs+=("mpi|2 mpi/mpi")
[ -x mpi/pipeline ] && progs+=("pipeline|2 mpi/pipeline")
[ -x hybrid/hybrid ] && progs+=("hybrid|--bind-to-none 2 hybrid/hybrid --threads 1")
[ -x cnn/cnn ] && progs+=("cnn|--bind-to-none 2 cnn/cnn --threads 1")
[ -x cuda/cuda-mpi-emu ] && progs+=("cuda-mpi-emu|2 cuda/cuda-mpi-emu")
[ -x cuda/cuda-mpi-emu ] || skip "cuda-mpi-emu: watchdog" "not built (make cuda-mpi)"

for entry in "${progs[@]}"; do
  label=${entry%%|*}
  read -r -a launch_args <<<"${entry#*|}"
  prog=${launch_args[-1]}; [ "$label" = hybrid ] || [ "$label" = cnn ] && prog=${launch_args[-3]}
  data=("${SMALL[@]}"); [ "$label" = cuda-mpi-emu ] && data=("${EMU_SMALL[@]}")

  # flags: --help, bad values
  $prog --help 2>/dev/null | grep -q -- '^ *--timeout-step S ' && pass "$label --help lists --timeout-step" ||
    fail "$label --help lists --timeout-step" "missing"
  expect_error "$label: --timeout-step -1 rejected" "--timeout-step" --label "$label" $MPI "${launch_args[@]}" \
    "${data[@]}" --timeout-step -1
  expect_error "$label: --timeout-step abc rejected" "--timeout-step" --label "$label" $MPI "${launch_args[@]}" \
    "${data[@]}" --timeout-step abc

  stop_case "$label" 1 $MPI "${launch_args[@]}" "${data[@]}" --epochs 100000
  case $label in mpi|pipeline) stop_case "$label" 0 $MPI "${launch_args[@]}" "${data[@]}" --epochs 100000 ;; esac
  normal_case "$label" $MPI "${launch_args[@]}" "${data[@]}" --epochs 3
done

if [ -x mpi/mpi ]; then
  # --timeout-step 0: nothing watches; rank 1 stopped for 9 s (a 2 s watchdog would have
  # ended the job after about 5 s), then resumed: the run ends normally
  name="mpi P=2, --timeout-step 0: rank 1 stopped for 9 s is not reported; resumed, the run ends normally"
  launch $MPI 2 mpi/mpi "${SMALL[@]}" --epochs 40 --timeout-step 0
  if wait_epoch1 && pid=$(rank_pid "$JOB" 1); then
    kill -STOP "$pid"; STOPPED="$pid"
    sleep 9
    alive=0; kill -0 "$JOB" 2>/dev/null && alive=1
    kill -CONT "$pid"; STOPPED=""
    finish_job 120
    check "$name" "alive after 9 s: $alive, exit $RC, $(csv_rows "$TMP/wd.csv") rows: $(head -c 300 "$TMP/err")" \
      [ $alive = 1 -a "$RC" = 0 -a "$(csv_rows "$TMP/wd.csv")" = 1 ]
  else
    finish_job 5
    fail "$name" "no epoch line or no rank 1 process: $(head -c 300 "$TMP/err")"
  fi

  # random images for the two cases below, uncompressed (fast to load): $TMP/wide holds
  # 80,000 28x28 test images, $TMP/big 8,000 80x80 training images
  mkdir -p "$TMP/wide" "$TMP/big"
  python3 - "$TMP" <<'PY' || fail "watchdog: writing IDX files" "python3 failed"
import os, struct, sys
for d, name, n, side in (("wide", "train", 200, 28), ("wide", "t10k", 80000, 28),
                         ("big", "train", 8000, 80), ("big", "t10k", 100, 80)):
    with open(f"{sys.argv[1]}/{d}/{name}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, side, side)); f.write(os.urandom(n * side * side))
    with open(f"{sys.argv[1]}/{d}/{name}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, n)); f.write(bytes(b % 10 for b in os.urandom(n)))
PY

  # one rank works (a beat per evaluation chunk of 512 rows) while the other waits longer
  # than S: rank 1 evaluates a 40,000-sample test shard of a 20M-parameter net (79 chunks
  # of 20 GFLOP: 10 s to a minute), rank 0 one sample (mpirun's MPMD form gives them
  # different --test);
  # PARTRAIN_WATCHDOG_VERBOSE=1 prints each roll call's verdict
  heavy=(--data "$TMP/wide" --train 200 --hidden 4096,4096 --epochs 1 --timeout-step 3)
  rm -f "$TMP/wd.csv"
  PARTRAIN_WATCHDOG_VERBOSE=1 timeout 300 $MPI 1 mpi/mpi "${heavy[@]}" --test 2 --csv "$TMP/wd.csv" : \
    -np 1 mpi/mpi "${heavy[@]}" --test 80000 --csv none >"$TMP/out" 2>"$TMP/err"
  RC=$?
  lines=$(grep -c "^mpi: .*\(does not answer\|no rank has made progress\)" "$TMP/err")
  check "mpi P=2: rank 0 waits while rank 1 evaluates a large shard (--timeout-step 3): no abort, a row" \
    "exit $RC, $lines watchdog lines: $(grep '^mpi: ' "$TMP/err" | head -c 400)" \
    [ "$RC" = 0 -a "$lines" = 0 -a "$(csv_rows "$TMP/wd.csv")" = 1 ]
  if grep -q "watchdog: roll call .*a slow step elsewhere" "$TMP/err"; then
    pass "mpi P=2: the roll call during that wait saw rank 1 progress (a slow step elsewhere, not a hang)"
  else
    skip "mpi P=2: a roll call during the wait" "rank 1 evaluated too fast for a roll call: $(grep 'watchdog' "$TMP/err" | head -c 200)"
  fi

  # steps slower than S on every rank (4,000 rows of a 43M-parameter net per rank and
  # step: 1 TFLOP; --timeout-step 1): every rank answers, none progresses, twice: one
  # line, exit 1 (about 8 s into the first step)
  name="mpi P=2: steps slower than --timeout-step 1 on every rank: the no-progress verdict"
  launch timeout 120 $MPI 2 mpi/mpi --data "$TMP/big" --train 8000 --test 100 --batch 8000 --hidden 4096,4096 \
    --epochs 2 --timeout-step 1
  finish_job 150
  lines=$(grep -c "^mpi: .*--timeout-step" "$TMP/err")
  check "$name: exit 1, one line, no CSV" \
    "exit $RC, $lines lines, csv $([ -e "$TMP/wd.csv" ] && echo written || echo absent): $(grep '^mpi: ' "$TMP/err" | head -c 400)" \
    [ "$RC" = 1 -a "$lines" = 1 -a ! -e "$TMP/wd.csv" -a \
    "$(grep -c '^mpi: no rank has made progress for [0-9]* s, and all 2 answer' "$TMP/err")" = 1 ]
fi
# ---- authentication (issue 30): rank 1 SIGSTOPped while a forger that knows the port and
# the format, not the key, sends DONE "from rank 1" to rank 0 (the old format with a nonce,
# and the new one with a made-up tag and counters): the datagrams are dropped, the
# watchdog still fires. The sockets listen on 127.0.0.1 (one host), never 0.0.0.0.
if [ -x mpi/mpi ]; then
  name="mpi P=2: forged DONE datagrams from 'rank 1' (no key) while rank 1 is SIGSTOPped"
  PARTRAIN_WATCHDOG_VERBOSE=1 launch $MPI 2 mpi/mpi "${SMALL[@]}" --epochs 100000 --timeout-step 2
  if wait_epoch1 && pid=$(rank_pid "$JOB" 1) && port=$(sed -n 's/^mpi: rank 0: watchdog: pid [0-9]* listens on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$TMP/err") && [ -n "$port" ]; then
    bound=$(ss -uapn 2>/dev/null | grep -c "pid=$pid,")
    wild=$(ss -uapn 2>/dev/null | grep "pid=$pid," | grep -c '0\.0\.0\.0:[0-9]')
    check "mpi P=2: the watchdog's socket is bound to 127.0.0.1, not 0.0.0.0" "$bound sockets, $wild on 0.0.0.0" \
      [ "$wild" = 0 ]
    python3 - "$port" <<'PY' &
import socket, struct, sys, time
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for k in range(150):   # 15 s: the stop below, --timeout-step 2 and the 2.5 s roll call
    # the new format: magic, DONE (5), from rank 1, a counter, a tag made up
    s.sendto(struct.pack("!11I", 0x70774448, 5, 1, 0, 1000 + k, 0, 0, 0, 0, k, k), ("127.0.0.1", port))
    # the old format (magic, nonce, kind, from, ...)
    s.sendto(struct.pack("!9I", 0x70774447, 1, 2, 5, 1, 0, 0, 0, 0), ("127.0.0.1", port))
    time.sleep(0.1)
PY
    forger=$!
    # rank 1 stopped once rank 0 has dropped the first forgery (the forger is running)
    for _ in $(seq 50); do grep -q "wrong tag dropped" "$TMP/err" && break; sleep 0.1; done
    kill -STOP "$pid"; STOPPED="$pid"
    finish_job 60
    wait "$forger" 2>/dev/null
    dropped=$(grep -c "^mpi: rank 0: watchdog: a datagram with a wrong tag dropped" "$TMP/err")
    named=$(grep -c "^mpi: rank 1 (host [^,]*, pid $pid) does not answer" "$TMP/err")
    check "$name: dropped, the watchdog still fires naming rank 1 (exit 1)" \
      "exit $RC, $dropped dropped: $(grep '^mpi: .*\(does not answer\|progress\)' "$TMP/err" | head -c 300)" \
      [ "$RC" = 1 -a "$dropped" -gt 0 -a "$named" = 1 ]
    kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null; STOPPED=""
  else
    finish_job 5
    fail "$name" "no epoch line, rank 1 or port (exit $RC): $(head -c 300 "$TMP/err")"
  fi
fi
finish
