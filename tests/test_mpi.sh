#!/usr/bin/env bash
# tests/test_mpi.sh — the MPI trainers against serial: mpi/mpi (data parallel, every
# --sync, P = 1..4 ranks, 3 and 4 oversubscribed on 2 cores) and mpi/pipeline (P = 2, 3
# stages, M = 1, 4 micro-batches) reproduce serial's per-epoch loss over 3 epochs;
# allreduce and reduce-bcast end with the same parameters; --sync hierarchical across
# pseudo-nodes (PARTRAIN_RANKS_PER_NODE=K: 2 nodes x 2 ranks, and 2 + 1) matches serial
# and a bad K is refused; mpi/shm (MPI-3 shared-memory windows) with P = 1..4 ranks on
# one node equals serial bit for bit (loss and accuracy curves, and the parameters of
# the final checkpoint), and across 2 pseudo-nodes equals
# --sync allreduce within the tolerance; --batch-per-rank is the
# global batch P*B; the error paths (more ranks than samples, a batch smaller than P,
# bad flags, a rank that dies) end the job with a clear message instead of hanging;
# the AddressSanitizer/UBSan builds train cleanly.
#
# Tolerances (stated here and in docs/mpi.md):
#   P = 1 (every --sync) and pipeline M = 1 (any P): bit-identical to serial — the same
#     products in the same order, the same update formula.
#   P > 1 and pipeline M > 1: relative difference of each epoch's mean loss <= 1e-5. The
#     gradient sum A^T dZ is split into per-rank (per-micro-batch) partial sums that are
#     then added, so float rounding differs; measured maximum 6.2e-8 (lr 0.1, 3 epochs,
#     this configuration), so the tolerance leaves a margin of 160x.
#   allreduce vs reduce-bcast parameters: bit-identical when the two reductions add in
#     the same order (here P = 2, 4), else max |difference| <= 1e-5 * max |parameter|
#     (measured 3.3e-7 at P = 3).
#   shm with P ranks on one node vs serial: bit-identical (each parameter's sum goes on
#     from one rank's rows to the next, in rank order: serial's one chain over the batch).
#   shm across pseudo-nodes vs allreduce: the parameters within 1e-5 * max |parameter|
#     (the node sums are added in MPI's order among the leaders).
# Needs mpirun and mpicc (OpenMPI: apt-get install openmpi-bin libopenmpi-dev); without
# them every check is skipped with that reason, or fails when PARTRAIN_REQUIRE_MPI=1
# (for CI, where OpenMPI is meant to be installed).
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
DATA=data/mnist
RUN=scripts/mpirun.sh
TOL=1e-5
LIMIT=$((120 * SLOWDOWN)) # seconds after which a run counts as hung

if ! command -v mpirun >/dev/null || ! command -v "${MPICC:-mpicc}" >/dev/null; then
  if [ "${PARTRAIN_REQUIRE_MPI:-0}" = 1 ]; then
    fail "MPI trainers" "mpirun/mpicc not found but PARTRAIN_REQUIRE_MPI=1 (apt-get install openmpi-bin libopenmpi-dev)"
  else
    skip "MPI trainers" "mpirun/mpicc not found (apt-get install openmpi-bin libopenmpi-dev)"
  fi
  finish
fi
for b in mpi/mpi mpi/shm mpi/pipeline serial/serial; do
  [ -x $b ] || { fail "$b built" "missing (make all)"; }
done
[ "$FAILS" -eq 0 ] || finish

# the shared configuration: 1202 samples in batches of 60, so the last batch has 2 rows
# and with P = 3, 4 some ranks get an empty part of it (they still join every collective)
CONF=(--data $DATA --train 1202 --test 300 --batch 60 --epochs 3 --lr 0.1 --quiet)
CSV=$TMP/runs.csv

# last_curve PROGRAM VARIANT RANKS: train_loss_curve of the latest matching CSV row
last_curve() {
  awk -F, -v p="$1" -v v="$2" -v r="$3" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    $c["program"] == p && $c["variant"] == v && $c["ranks"] == r { x = $c["train_loss_curve"] } END { print x }' "$CSV"
}
# params_diff A B: "max |a - b| / max |a| N" of two raw float32 files
params_diff() {
  paste <(od -An -v -tf4 -w4 "$1") <(od -An -v -tf4 -w4 "$2") | awk '{ d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1;
    if (!(d <= md)) md = d; if (a > ma) ma = a; n++ } END { printf "%.3g %d\n", (ma > 0 ? md / ma : 1), n }'
}
# max_rel A B: largest relative difference between two ';'-separated curves ("bad" if lengths differ)
max_rel() {
  awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, ";"); m = split(b, y, ";");
    if (n != m || n == 0) { print "bad"; exit } d = 0;
    for (i = 1; i <= n; i++) { e = (x[i] - y[i]) / x[i]; if (e < 0) e = -e; if (!(e <= d)) d = e } printf "%.3g\n", d }'
}
# check_equal NAME CURVE EXACT: bit-identical to serial's curve when P = 1 or M = 1, else within TOL
check_equal() {
  local name=$1 curve=$2 exact=$3 d
  d=$(max_rel "$ref" "$curve")
  if [ "$exact" = 1 ]; then
    check "$name: bit-identical to serial" "serial $ref, got ${curve:-nothing} (max rel diff $d)" [ "$curve" = "$ref" ]
  else
    check "$name: per-epoch loss within $TOL of serial (max rel diff $d)" "serial $ref, got ${curve:-nothing}" \
      awk -v d="$d" -v t="$TOL" 'BEGIN { exit !(d != "bad" && d + 0 <= t + 0) }'
  fi
}
# run_mpi LOG ARGS...: a run that must finish in LIMIT seconds; exit status kept in $rc
run_mpi() {
  local log=$1; shift
  timeout $LIMIT "$@" >"$log" 2>&1; rc=$?
  [ $rc -ne 124 ] || echo "(killed after $LIMIT s: hung)" >>"$log"
}

serial/serial "${CONF[@]}" --csv "$CSV" >/dev/null 2>&1
ref=$(last_curve serial own-gemm 1)
check "serial reference run" "no CSV row" [ -n "$ref" ]

# ---- mpi/mpi: every --sync, P = 1..4
for sync in $(variants mpi/mpi); do
  for p in 1 2 3 4; do
    run_mpi "$TMP/out" $RUN $p mpi/mpi "${CONF[@]}" $(variant_flags mpi/mpi $sync) --csv "$CSV" --dump-params "$TMP/params-$sync-$p"
    if [ $rc -ne 0 ]; then
      fail "mpi --sync $sync, P = $p" "exit $rc: $(tail -n 5 "$TMP/out")"
      continue
    fi
    check_equal "mpi --sync $sync, P = $p" "$(last_curve mpi $sync $p)" $([ $p = 1 ] && echo 1 || echo 0)
  done
done
comm=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $c["program"] == "mpi" && $c["ranks"] == 2 { print $c["comm_seconds"] }' "$CSV" | head -n 1)
check "mpi reports the seconds inside MPI calls (comm_seconds $comm at P = 2)" "comm_seconds '$comm'" \
  awk -v c="$comm" 'BEGIN { exit !(c > 0) }'
check "mpi checks that the replicas end bit-identical" "$(tail -n 1 "$TMP/out")" grep -q "replicas identical" "$TMP/out"

# --sync hierarchical across pseudo-nodes (the test hook PARTRAIN_RANKS_PER_NODE=K: nodes of
# K consecutive ranks, as a cluster's would be): P = 4 as 2 nodes x 2 ranks, P = 3 as 2 + 1.
# The leaders' allreduce is then real traffic between the nodes' sums.
for pk in 4:2 3:2; do
  p=${pk%:*} k=${pk#*:}
  run_mpi "$TMP/out" env PARTRAIN_RANKS_PER_NODE=$k $RUN $p mpi/mpi "${CONF[@]}" --sync hierarchical --csv "$CSV"
  if [ $rc -ne 0 ]; then fail "mpi --sync hierarchical, P = $p, K = $k" "exit $rc: $(tail -n 5 "$TMP/out")"; continue; fi
  check "hierarchical, P = $p, K = $k: 2 pseudo-nodes" "$(head -n 3 "$TMP/out")" grep -q "hierarchical: 2 nodes, up to $k ranks" "$TMP/out"
  check_equal "mpi --sync hierarchical, P = $p as 2 pseudo-nodes of <= $k ranks" "$(last_curve mpi hierarchical $p)" 0
done
expect_error "bad PARTRAIN_RANKS_PER_NODE: one line, exit 2" "PARTRAIN_RANKS_PER_NODE='0'" --label mpi \
  env PARTRAIN_RANKS_PER_NODE=0 $RUN 2 mpi/mpi --data $DATA --train 100 --epochs 1 --sync hierarchical

# allreduce vs reduce-bcast: the same parameters
for p in 2 3 4; do
  a=$TMP/params-allreduce-$p b=$TMP/params-reduce-bcast-$p
  if [ ! -s "$a" ] || [ ! -s "$b" ]; then fail "allreduce vs reduce-bcast parameters, P = $p" "--dump-params wrote nothing"; continue; fi
  if cmp -s "$a" "$b"; then
    pass "allreduce vs reduce-bcast, P = $p: bit-identical parameters"
  else
    d=$(params_diff "$a" "$b")
    check "allreduce vs reduce-bcast, P = $p: parameters within $TOL (max diff / max |p| = ${d% *})" "$d" \
      awk -v d="${d% *}" -v n="${d#* }" -v t=$TOL 'BEGIN { exit !(n == 235146 && d + 0 <= t + 0) }'
  fi
done

# ---- mpi/shm: P ranks on one node = serial, bit for bit: the CSV's curves (17 digits)
# and the parameters of the final checkpoint (their SHA-256)
if [ -x /usr/bin/python3 ]; then
  d=$TMP/shm-serial; mkdir -p "$d"
  timeout $LIMIT serial/serial "${CONF[@]}" --checkpoint "$d/ser.ck" --csv "$d/ser.csv" >"$d/ser.out" 2>&1 ||
    fail "shm vs serial" "serial exit $?: $(tail -n 3 "$d/ser.out")"
  sig_s="$(csv_col "$d/ser.csv" train_loss_curve) $(csv_col "$d/ser.csv" test_acc_curve)"
  h_s=$(/usr/bin/python3 scripts/checkpoint.py --params "$d/ser.ck" 2>&1)
  for p in 1 2 3 4; do
    d=$TMP/shm-$p; mkdir -p "$d"
    run_mpi "$d/mpi.out" $RUN $p mpi/shm "${CONF[@]}" --checkpoint "$d/mpi.ck" --csv "$d/mpi.csv"
    [ $rc -eq 0 ] || { fail "shm P = $p vs serial" "mpi exit $rc: $(tail -n 3 "$d/mpi.out")"; continue; }
    sig_m="$(csv_col "$d/mpi.csv" train_loss_curve) $(csv_col "$d/mpi.csv" test_acc_curve)"
    check "shm P = $p: loss and accuracy curves = serial's, bit for bit" "shm $sig_m, serial $sig_s" \
      [ -n "$sig_m" ] && [ "$sig_m" = "$sig_s" ]
    h_m=$(/usr/bin/python3 scripts/checkpoint.py --params "$d/mpi.ck" 2>&1)
    check "shm P = $p: parameters = serial's, bit for bit ($h_m)" "shm $h_m, serial $h_s" \
      [ -n "$h_m" ] && [ "$h_m" = "$h_s" ] && [ ${#h_m} = 64 ]
  done
else
  skip "shm vs serial" "/usr/bin/python3 missing (scripts/checkpoint.py reads the checkpoints)"
fi
check "shm says how the window is shared" "$(head -n 3 "$TMP/shm-4/mpi.out" 2>/dev/null)" \
  grep -q "shm: 1 node, up to 4 ranks each sharing one copy of the model" "$TMP/shm-4/mpi.out"
# across pseudo-nodes: 2 x 2 and 2 + 1 ranks, against allreduce (whose P = 4, 3 runs above dumped their parameters)
for pk in 4:2 3:2; do
  p=${pk%:*} k=${pk#*:}
  run_mpi "$TMP/out" env PARTRAIN_RANKS_PER_NODE=$k $RUN $p mpi/shm "${CONF[@]}" --csv "$CSV" \
    --dump-params "$TMP/params-shm-k$k-$p"
  if [ $rc -ne 0 ]; then fail "mpi/shm, P = $p, K = $k" "exit $rc: $(tail -n 5 "$TMP/out")"; continue; fi
  check "shm, P = $p, K = $k: 2 pseudo-nodes, leaders' allreduce" "$(head -n 3 "$TMP/out")" \
    grep -q "shm: 2 nodes, up to $k ranks each sharing one copy of the model, node leaders allreduce" "$TMP/out"
  c_shm=$(last_curve mpi shm $p) c_all=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    $c["program"] == "mpi" && $c["variant"] == "allreduce" && $c["ranks"] == '$p' { x = $c["train_loss_curve"] } END { print x }' "$CSV")
  d=$(max_rel "$c_all" "$c_shm")
  check "shm, P = $p as 2 pseudo-nodes: per-epoch loss within $TOL of allreduce (max rel diff $d)" "allreduce $c_all, shm $c_shm" \
    awk -v d="$d" -v t="$TOL" 'BEGIN { exit !(d != "bad" && d + 0 <= t + 0) }'
  d=$(params_diff "$TMP/params-allreduce-$p" "$TMP/params-shm-k$k-$p")
  check "shm, P = $p as 2 pseudo-nodes: parameters within $TOL of allreduce (max diff / max |p| = ${d% *})" "$d" \
    awk -v d="${d% *}" -v n="${d#* }" -v t=$TOL 'BEGIN { exit !(n == 235146 && d + 0 <= t + 0) }'
done
# resume across pseudo-nodes (rank 0 loads the window of its node, the other node's leader
# gets the parameters): 2 epochs, then --resume to 3 = the 3 epochs of P = 4 above
conf2=("${CONF[@]}"); for i in "${!conf2[@]}"; do [ "${conf2[$i]}" = --epochs ] && conf2[$((i + 1))]=2; done
run_mpi "$TMP/out" env PARTRAIN_RANKS_PER_NODE=2 $RUN 4 mpi/shm "${conf2[@]}" --checkpoint "$TMP/shm-k2.ck" --csv none
run_mpi "$TMP/out2" env PARTRAIN_RANKS_PER_NODE=2 $RUN 4 mpi/shm "${CONF[@]}" --resume "$TMP/shm-k2.ck" \
  --csv "$TMP/shm-resumed.csv" --dump-params "$TMP/params-shm-resumed"
check "shm, P = 4 as 2 pseudo-nodes, resumed after epoch 2: the same curve and parameters as 3 epochs straight" \
  "exit $rc: $(tail -n 2 "$TMP/out2"); $(csv_col "$TMP/shm-resumed.csv" train_loss_curve) vs $(last_curve mpi shm 4)" \
  cmp -s "$TMP/params-shm-resumed" "$TMP/params-shm-k2-4"
expect_error "shm: bad PARTRAIN_RANKS_PER_NODE: one line, exit 2" "PARTRAIN_RANKS_PER_NODE='x'" --label shm \
  env PARTRAIN_RANKS_PER_NODE=x $RUN 2 mpi/shm --data $DATA --train 100 --epochs 1

# --batch-per-rank B is the global batch P*B: 3 ranks x 20 = serial's batch of 60
conf_pr=("${CONF[@]}"); for i in "${!conf_pr[@]}"; do [ "${conf_pr[$i]}" = --batch ] && conf_pr[$i]=--batch-per-rank && conf_pr[$((i + 1))]=20; done
run_mpi "$TMP/out" $RUN 3 mpi/mpi "${conf_pr[@]}" --csv "$CSV"
check "--batch-per-rank 20 with 3 ranks records batch 60" "$(tail -n 3 "$TMP/out")" [ "$(csv_col "$CSV" batch)" = 60 ]
check_equal "--batch-per-rank 20, P = 3" "$(csv_col "$CSV" train_loss_curve)" 0

# ---- mpi/pipeline: P = 2, 3 stages, M = 1, 4 micro-batches (M = 1: bit-identical)
for p in 2 3; do
  for m in 1 4; do
    run_mpi "$TMP/out" $RUN $p mpi/pipeline "${CONF[@]}" --microbatches $m --csv "$CSV"
    if [ $rc -ne 0 ]; then fail "pipeline P = $p, M = $m" "exit $rc: $(tail -n 5 "$TMP/out")"; continue; fi
    check_equal "pipeline P = $p, M = $m" "$(last_curve pipeline gpipe-m$m $p)" $([ $m = 1 ] && echo 1 || echo 0)
  done
done
check "pipeline prints the measured bubble beside (P-1)/(M+P-1)" "$(tail -n 2 "$TMP/out")" \
  grep -qE "measured bubble .* 0: [0-9.]+ 1: [0-9.]+ 2: [0-9.]+; mean [0-9.]+ vs GPipe's \(P-1\)/\(M\+P-1\) = 0.333" "$TMP/out"
run_mpi "$TMP/out" $RUN 2 mpi/pipeline "${CONF[@]}" --microbatches 3 --split 2 --csv "$CSV"
check_equal "pipeline P = 2, --split 2 (layers 1-2 | 3), M = 3" "$(last_curve pipeline gpipe-m3-split2 2)" 0
idle=$(csv_col "$CSV" sync_seconds)
check "pipeline: sync_seconds holds the idle seconds ($idle)" "sync_seconds '$idle'" awk -v s="$idle" 'BEGIN { exit !(s > 0) }'

# ---- errors: one line from the program naming the problem, exit 2, no CSV row, no hang.
# (through mpirun, mpirun adds its own "process returned a non-zero exit code" block)
# expect_error NAME KEYWORD PROGRAM-LABEL COMMAND...
expect_error "more ranks than training samples: clear error" "4 ranks but only 3 training samples" --label mpi \
  $RUN 4 mpi/mpi --data $DATA --train 3 --epochs 1
expect_error "global batch smaller than P: clear error" "--batch 2 is smaller than the 3 ranks" --label mpi \
  $RUN 3 mpi/mpi --data $DATA --train 100 --batch 2 --epochs 1
expect_error "bad --sync through mpirun: one line from rank 0" "--sync" --label mpi $RUN 2 mpi/mpi --data $DATA --sync magic
expect_error "mpi/shm: a --sync other than shm rejected" "--sync" --label shm $RUN 2 mpi/shm --data $DATA --sync allreduce
expect_error "--batch with --batch-per-rank rejected" "not both" --label mpi $RUN 2 mpi/mpi --data $DATA --batch 10 --batch-per-rank 5
expect_error "missing data directory through mpirun names the file" "/nonexistent/dir" --label mpi $RUN 2 mpi/mpi --data /nonexistent/dir
expect_error "pipeline: more stages than layers rejected" "only 3 layers" --label pipeline $RUN 4 mpi/pipeline --data $DATA
expect_error "pipeline: --split with the wrong count rejected" "--split" --label pipeline $RUN 2 mpi/pipeline --data $DATA --split 1,2
expect_error "pipeline: more micro-batches than rows rejected" "--microbatches" --label pipeline \
  $RUN 2 mpi/pipeline --data $DATA --batch 4 --microbatches 5
# started without mpirun (a singleton MPI process): exactly one stderr line, like serial
timeout $LIMIT mpi/mpi --data $DATA --epochs 0 --csv "$TMP/err.csv" >/dev/null 2>"$TMP/err"; rc=$?
ok=0; [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -- --epochs "$TMP/err" && ok=1
check "without mpirun: bad flag gives exactly one stderr line, exit 2" "exit $rc: $(cat "$TMP/err")" [ $ok = 1 ]

# --help lists the MPI flags, and README documents them
for b in mpi pipeline; do
  flags=$(mpi/$b --help 2>/dev/null | grep -oE '^ +--[a-z-]+' | tr -d ' ' | sort -u)
  undocumented=$(for f in $flags; do grep -q -- "\`$f" README.md || echo "$f"; done)
  check "$b --help flags are documented in README" "not in README: $undocumented" [ -n "$flags" -a -z "$undocumented" ]
done

# a rank that dies mid-training ends the whole job (mpirun reports it) instead of a hang
kill_one_rank() {
  $RUN 2 mpi/mpi --data $DATA --train 4000 --batch 8 --epochs 1000 --csv none >"$TMP/die.out" 2>&1 &
  local job=$! victim
  for _ in $(seq 1 100); do grep -q '^epoch 1/' "$TMP/die.out" && break; sleep 0.2; done
  victim=$(mpi_ranks $job | tail -n 1)   # the ranks are the children of the job's mpirun
  if [ -z "$victim" ]; then
    kill $job 2>/dev/null; wait $job 2>/dev/null
    fail "a killed rank ends the job" "no rank process found under mpirun (pid $job): $(tail -n 3 "$TMP/die.out")"
    return
  fi
  kill -9 "$victim"
  for _ in $(seq 1 150); do kill -0 $job 2>/dev/null || break; sleep 0.2; done
  if kill -0 $job 2>/dev/null; then
    kill $job; wait $job 2>/dev/null
    fail "a killed rank ends the job" "mpirun still running 30 s after rank pid $victim was killed"
    return
  fi
  wait $job; rc=$?
  ok=0; [ $rc -ne 0 ] && grep -qiE "signal 9|killed" "$TMP/die.out" && ok=1
  check "a killed rank ends the job within 30 s, non-zero exit ($rc), reported" "$(tail -n 4 "$TMP/die.out")" [ $ok = 1 ]
}
if command -v pgrep >/dev/null; then kill_one_rank; else skip "a killed rank ends the job" "pgrep missing (apt-get install procps)"; fi

# ---- the sanitizer builds (OpenMPI's own allocations are reported as leaks at exit, so
# leak detection is off: ASAN_OPTIONS=detect_leaks=0)
# (shm also across 2 pseudo-nodes, 2 + 1 ranks: the node sums and the leaders' allreduce)
for cfg in "mpi||--sync overlap" "shm||--sync shm" "shm|2|--sync shm" "pipeline||--microbatches 3"; do
  IFS='|' read -r b k opts <<<"$cfg"
  read -r -a extra <<<"$opts"
  bin=$(sanitized mpi/$b)
  if [ ! -x $bin ]; then fail "$b sanitizer build" "$bin not built (make test builds it: make SANITIZE=1 mpi/$b)"; continue; fi
  ASAN_OPTIONS=detect_leaks=0 run_mpi "$TMP/asan" env ${k:+PARTRAIN_RANKS_PER_NODE=$k} $RUN 3 $bin --data $DATA \
    --train 500 --test 101 --batch 49 --epochs 2 --predict 1 --csv none "${extra[@]}"
  ok=0; [ $rc -eq 0 ] && ! grep -qE 'ERROR|runtime error' "$TMP/asan" && grep -q "predicted [0-9], true" "$TMP/asan" && ok=1
  check "AddressSanitizer/UBSan build of $b ${extra[*]} trains cleanly (3 ranks${k:+ as 2 pseudo-nodes})" \
    "exit $rc: $(grep -m3 -E 'ERROR|runtime error' "$TMP/asan")$(tail -n 2 "$TMP/asan")" [ $ok = 1 ]
done
finish
