#!/usr/bin/env bash
# tests/test_trace.sh — --trace FILE (common/trace.h, docs/tracing.md) in every trainer:
#   - serial, openmp (critical and reduction, T = 2), mpi allreduce and overlap P = 2,
#     mpi/shm P = 2, mpi/pipeline P = 2, hybrid 2 x 2, cnn 2 ranks, cuda-emu: one epoch
#     on 1,000 MNIST digits writes a trace that tests/check_trace.py accepts (the JSON
#     loads; only "X" and "M" events; ts, dur finite and >= 0; pid < ranks, tid < threads;
#     per rank each step's top-level spans inside it, not overlapping, covering it within
#     2 %), and the run's CSV row (loss and accuracy curves) is the same as without
#     --trace, as are the final parameters where the trainer has --dump-params;
#   - without --trace nothing is written; --trace-steps N traces N steps;
#   - PARTRAIN_SLOW_RANK=1:US (mpi allreduce P = 2): rank 1 alone has "slowdown" spans and
#     rank 0 spends more time in MPI calls than rank 1 (it waits for the slow rank);
#   - bad inputs, one line and exit 2 before the work, nothing written: a symbolic link,
#     the --csv file, an existing file that is not a trace, --trace-steps 0 or junk, a
#     malformed PARTRAIN_SLOW_RANK.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
DATA=data/mnist
RUN=scripts/mpirun.sh
LIMIT=$((180 * SLOWDOWN))
PY=/usr/bin/python3
CONF=(--data $DATA --train 1000 --test 200 --epochs 1 --quiet)
EXTRA=()   # flags after CONF for one trainer (the CUDA emulation runs a smaller net: it is slow)
export OMP_WAIT_POLICY=passive   # 2 threads or 2 x 2 on a 2-core machine: no spinning

[ -x $PY ] || { skip "trace tests" "$PY not found"; finish; }
have_mpi=1
command -v mpirun >/dev/null || have_mpi=0

# curves CSV: the loss and accuracy curves of its last row
curves() { echo "$(csv_col "$1" train_loss_curve) $(csv_col "$1" test_acc_curve)"; }

# traced NAME RANKS THREADS DUMP COMMAND...: COMMAND once without and once with --trace
# (DUMP=1: with --dump-params); checks the trace and that the results are the same
traced() {
  local name=$1 ranks=$2 threads=$3 dump=$4; shift 4
  local off=() on=()
  [ "$dump" = 1 ] && off=(--dump-params "$TMP/p-off") on=(--dump-params "$TMP/p-on")
  rm -f "$TMP/off.csv" "$TMP/on.csv" "$TMP/t.json" "$TMP/p-off" "$TMP/p-on"
  if ! timeout $LIMIT "$@" "${CONF[@]}" "${EXTRA[@]}" --csv "$TMP/off.csv" "${off[@]}" >"$TMP/out" 2>&1; then
    fail "$name: runs without --trace" "$(tail -n 3 "$TMP/out")"; return
  fi
  check "$name: without --trace no trace file" "$(ls "$TMP")" [ ! -e "$TMP/t.json" ]
  if ! timeout $LIMIT "$@" "${CONF[@]}" "${EXTRA[@]}" --csv "$TMP/on.csv" "${on[@]}" --trace "$TMP/t.json" >"$TMP/out" 2>&1; then
    fail "$name: runs with --trace" "$(tail -n 3 "$TMP/out")"; return
  fi
  local verdict
  verdict=$($PY tests/check_trace.py "$TMP/t.json" "$ranks" "$threads" 2>&1)
  check "$name: the trace is valid ($(echo "$verdict" | head -n 1))" "$verdict" [ "${verdict#ok:}" != "$verdict" ]
  check "$name: the same loss and accuracy with --trace" "$(curves "$TMP/off.csv") vs $(curves "$TMP/on.csv")" \
    [ "$(curves "$TMP/off.csv")" = "$(curves "$TMP/on.csv")" ]
  if [ "$dump" = 1 ]; then
    check "$name: the same final parameters with --trace" "" cmp -s "$TMP/p-off" "$TMP/p-on"
  fi
}

traced "serial" 1 1 0 serial/serial
# the checker itself, on that serial trace altered: a part left unmarked in every step fails,
# preemption-like gaps at a different place in 12 of 16 steps pass
cp "$TMP/t.json" "$TMP/serial.json"
alter() {  # alter OUT EVERY: shift each chosen step's span begin 10 % of its step later
  $PY -c '
import json, sys
doc = json.load(open(sys.argv[1])); every = sys.argv[3] == "every"
ev = [e for e in doc["traceEvents"] if e["ph"] == "X"]
steps = sorted((e for e in ev if e["cat"] == "step"), key=lambda e: e["ts"])
names = ["forward L1", "backward L3", "backward L2", "backward L1"]
for n, s in enumerate(steps[:16] if every else steps[:12]):
    want = "forward L1" if every else names[n % 4]
    for e in ev:
        if e["cat"] != "step" and e["name"] == want and (e["args"]["epoch"], e["args"]["step"]) == (s["args"]["epoch"], s["args"]["step"]):
            cut = min(0.1 * s["dur"], e["dur"]); e["ts"] += cut; e["dur"] -= cut
open(sys.argv[2], "w").write(json.dumps(doc, separators=(",", ":")))' "$TMP/serial.json" "$1" "$2"
}
alter "$TMP/unmarked.json" every
verdict=$($PY tests/check_trace.py "$TMP/unmarked.json" 1 1 2>&1)
check "check_trace: a part unmarked in every step is found ($(echo "$verdict" | head -n 1))" "$verdict" \
  [ "${verdict#*unmarked time}" != "$verdict" ]
alter "$TMP/preempted.json" scattered
verdict=$($PY tests/check_trace.py "$TMP/preempted.json" 1 1 2>&1)
check "check_trace: gaps at a different place in 12 of 16 steps pass ($(echo "$verdict" | head -n 1))" "$verdict" \
  [ "${verdict#ok:}" != "$verdict" ]
traced "openmp critical T=2" 1 2 0 openmp/openmp --threads 2 --accum critical
traced "openmp reduction T=2" 1 2 0 openmp/openmp --threads 2 --accum reduction
if [ -x cuda/cuda-emu ]; then
  EXTRA=(--train 200 --test 50 --hidden 32,16 --batch 50)
  traced "cuda-emu (200 samples, 784-32-16-10)" 1 1 0 cuda/cuda-emu
  EXTRA=()
else skip "cuda-emu trace" "cuda/cuda-emu not built (make all says why)"; fi
if [ $have_mpi = 1 ]; then
  traced "mpi allreduce P=2" 2 1 1 $RUN 2 mpi/mpi --sync allreduce
  traced "mpi overlap P=2" 2 1 1 $RUN 2 mpi/mpi --sync overlap
  traced "mpi/shm P=2" 2 1 1 $RUN 2 mpi/shm
  traced "mpi/pipeline P=2" 2 1 0 $RUN 2 mpi/pipeline
  traced "hybrid 2x2" 2 2 1 $RUN --bind-to-none 2 hybrid/hybrid --threads 2
  traced "cnn 2 ranks" 2 1 0 $RUN --bind-to-none 2 cnn/cnn --threads 1
else
  skip "MPI trainers' traces" "mpirun not found (apt-get install openmpi-bin)"
fi

# --trace-steps N: N steps traced (16 steps an epoch here)
serial/serial "${CONF[@]}" --csv none --trace "$TMP/t5.json" --trace-steps 5 >/dev/null 2>&1
check "--trace-steps 5 traces 5 steps" "$($PY tests/check_trace.py "$TMP/t5.json" 1 1)" \
  $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d["otherData"]["steps_traced"] == 5 and
sum(e.get("cat") == "step" for e in d["traceEvents"]) == 5))' "$TMP/t5.json"
# --trace-from 16 --trace-steps 5 over 2 epochs of 16 steps: steps 16..20, all of epoch 2
serial/serial "${CONF[@]}" --epochs 2 --csv none --trace "$TMP/w.json" --trace-from 16 --trace-steps 5 >/dev/null 2>&1
check "--trace-from 16 --trace-steps 5: epoch 2's steps 16-20 ($($PY tests/check_trace.py "$TMP/w.json" 1 1))" "" \
  $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); st=[e for e in d["traceEvents"] if e.get("cat") == "step"]
sys.exit(not (d["otherData"]["first_step"] == 16 and d["otherData"]["steps_traced"] == 5 and
sorted(e["args"]["step"] for e in st) == list(range(16, 21)) and all(e["args"]["epoch"] == 2 for e in st)))' "$TMP/w.json"
# a trace this suite wrote may be replaced
serial/serial "${CONF[@]}" --csv none --trace "$TMP/t5.json" --trace-steps 3 >/dev/null 2>&1
check "an existing trace is replaced" "" $PY -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["otherData"]["steps_traced"] != 3)' "$TMP/t5.json"

# the slow-rank hook: rank 1 spins 3 ms a step, rank 0 waits for it in MPI_Allreduce
if [ $have_mpi = 1 ]; then
  rm -f "$TMP/slow.json"
  PARTRAIN_SLOW_RANK=1:3000 timeout $LIMIT $RUN 2 mpi/mpi "${CONF[@]}" --csv none --trace "$TMP/slow.json" >"$TMP/out" 2>&1
  check "PARTRAIN_SLOW_RANK=1:3000: rank 1 alone slowed, rank 0 waits in MPI" "$(tail -n 2 "$TMP/out")" $PY -c '
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
slow = {r: sum(e["dur"] for e in ev if e["pid"] == r and e["name"] == "slowdown") for r in (0, 1)}
mpi = {r: sum(e["dur"] for e in ev if e["pid"] == r and e["cat"] in ("comm", "wait") and e["args"]["step"] >= 0) for r in (0, 1)}
steps = sum(e["cat"] == "step" and e["pid"] == 1 for e in ev)
sys.exit(not (slow[0] == 0 and slow[1] >= 3000 * steps and mpi[0] > mpi[1] + 1000 * steps))' "$TMP/slow.json"
fi
expect_error "a malformed PARTRAIN_SLOW_RANK" "PARTRAIN_SLOW_RANK" env PARTRAIN_SLOW_RANK=1 serial/serial "${CONF[@]}"

# bad inputs: one line, exit 2, nothing written (expect_error checks the CSV)
ln -s "$TMP/target.json" "$TMP/link.json"
expect_error "--trace a symbolic link" "symbolic link" serial/serial "${CONF[@]}" --trace "$TMP/link.json"
check "--trace a symbolic link: its target not created" "" [ ! -e "$TMP/target.json" ]
cp "$TMP/off.csv" "$TMP/own.csv"
cp "$TMP/off.csv" "$TMP/own-before.csv"
expect_error "--trace the --csv file" "same file" serial/serial "${CONF[@]}" --csv "$TMP/own.csv" --trace "$TMP/own.csv"
check "--trace the --csv file: the file untouched" "" cmp -s "$TMP/own.csv" "$TMP/own-before.csv"
ln "$TMP/own.csv" "$TMP/own-hardlink.csv"
expect_error "--trace a hard link to the --csv file" "same file" serial/serial "${CONF[@]}" --csv "$TMP/own.csv" \
  --trace "$TMP/own-hardlink.csv"
echo '{"someone":"else"}' >"$TMP/foreign.json"
expect_error "--trace an existing file that is not a trace" "not a partrain trace" serial/serial "${CONF[@]}" --trace "$TMP/foreign.json"
check "--trace a foreign file: untouched" "" [ "$(cat "$TMP/foreign.json")" = '{"someone":"else"}' ]
expect_error "--trace-steps 0" "trace-steps" serial/serial "${CONF[@]}" --trace "$TMP/n.json" --trace-steps 0
expect_error "--trace-steps junk" "trace-steps" serial/serial "${CONF[@]}" --trace "$TMP/n.json" --trace-steps 5x
expect_error "--trace-from -1" "trace-from" serial/serial "${CONF[@]}" --trace "$TMP/n.json" --trace-from -1
expect_error "--trace into a missing directory" "does not exist" serial/serial "${CONF[@]}" --trace "$TMP/no/such/t.json"
expect_error "openmp: --trace a symbolic link" "symbolic link" openmp/openmp --threads 2 "${CONF[@]}" --trace "$TMP/link.json"
if [ $have_mpi = 1 ]; then
  expect_error "mpi: --trace an existing file that is not a trace" "not a partrain trace" --label mpi \
    $RUN 2 mpi/mpi "${CONF[@]}" --trace "$TMP/foreign.json"
fi
check "bad inputs: no trace written" "$(ls "$TMP"/*.json 2>/dev/null)" [ ! -e "$TMP/n.json" ] && [ ! -e "$TMP/no" ]
finish
