#!/usr/bin/env bash
# tests/test_openmp.sh — openmp/openmp against serial/serial, on 2,000 real MNIST digits.
#
# Equivalence: for T = 1..4 threads and each --accum mode, the per-epoch training loss
# of 3 epochs matches serial's (same seed) and the final test accuracy is within 0.2
# percentage points. Tolerances, and why:
#   T = 1, every mode: bit-identical (the same kernels in the same order; the gradient
#     product then fmaf(scale, g, W) equals serial's fused update exactly).
#   loop, any T: the weights are bit-identical (each element of each product is computed
#     by one thread in serial's order), so the test accuracy is equal and the loss differs
#     at most by the order of the double-precision sum over the threads' rows: 1e-12.
#   owner, any T: the same (each parameter's owner sums every thread's rows as one chain,
#     thread after thread: serial's chain over the batch).
#   critical / reduction, T > 1: the batch gradient is summed as T partial sums instead of
#     one running sum, which rounds each gradient element differently (relative error
#     below B * 2^-24); that perturbs the weights a little each step. Measured over 72
#     configurations (3 seeds x batch 16/32/64 x T = 2,3,4,8 x both modes): at most
#     1.2e-7 relative deviation of the loss, no change of test accuracy. Tolerance: 1e-5
#     relative (80x margin), still far below what a real bug does (a thread's gradient
#     left out, or a per-thread instead of global batch mean: 1e-3 .. 1e-1).
#   model, T > 1: only layer 2's pre-activation is summed in pieces (one partial product
#     per thread that owns hidden units), every other element as in serial: the same
#     kind of rounding difference, under the same 1e-5 tolerance (measured: see the
#     "info:" line).
# Also: owner gives serial's parameters bit for bit; reduction, owner and model are
# bit-identical from run to run; tiny slices (batch 16 and 5 with 8
# threads, threads without rows); sigmoid, leaky-relu, deeper nets, resampled images,
# full batch (loop: the same weights as serial, through the update's K blocks); the CSV
# row; the default thread count; the oversubscription warning; the command-line contract
# (tests/test_cli.sh with BIN=openmp/openmp); and the AddressSanitizer/UBSan build. Runs
# with more threads than cores use OMP_WAIT_POLICY=passive (spinning would only make
# them slow, not wrong).
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
BIN=${BIN:-openmp/openmp}
SERIAL=serial/serial
DATA=data/mnist
TOL=1e-5
CSV=$TMP/runs.csv

if [ ! -x $BIN ]; then
  skip "openmp tests" "openmp/openmp not built (make all says why: no OpenMP, or NO_OMP=1)"
  exit 0
fi
[ -x $SERIAL ] || { fail "openmp tests" "serial/serial not built (the reference)"; finish; }
unset OMP_NUM_THREADS
export OMP_WAIT_POLICY=passive

# run_curve PROG ARGS...: one run into $CSV; echoes "loss_curve test_accuracy"
run_curve() {
  "$@" --csv "$CSV" --quiet >"$TMP/out" 2>&1 || { echo "FAILED: $(tail -n 3 "$TMP/out")"; return; }
  echo "$(csv_col "$CSV" train_loss_curve) $(csv_col "$CSV" test_accuracy)"
}
# maxdev "curveA accA" "curveB accB": max relative deviation of the loss curves, and
# the accuracy difference
maxdev() {
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, A, " "); split(b, B, " "); n = split(A[1], x, ";"); m = split(B[1], y, ";");
    if (n != m || n == 0) { print "nan nan"; exit } worst = 0
    for (i = 1; i <= n; i++) { d = (x[i] - y[i]) / y[i]; if (d < 0) d = -d; if (!(d <= worst)) worst = d }
    da = A[2] - B[2]; if (da < 0) da = -da; printf "%.3g %.3g\n", worst, da }'
}
# within DEV ACCDIFF TOL: DEV <= TOL and ACCDIFF <= 0.2 (NaN-safe)
within() { awk -v d="$1" -v a="$2" -v t="$3" 'BEGIN { exit !(d <= t && a <= 0.2) }'; }

# ---- equivalence with serial: T = 1..4, every mode ----------------------------------
EQ=(--data $DATA --train 2000 --test 500 --epochs 3 --batch 32 --lr 0.1 --seed 1)
ref=$(run_curve $SERIAL "${EQ[@]}")
declare -A first
worst_dp=0
for v in $(variants $BIN); do
  for T in 1 2 3 4; do
    got=$(run_curve $BIN "${EQ[@]}" $(variant_flags $BIN $v) --threads $T)
    first[$v$T]=$got
    read -r dev dacc <<<"$(maxdev "$got" "$ref")"
    if [ "$T" = 1 ]; then
      check "$v T=1: bit-identical to serial (loss ${got%% *})" "got '$got', serial '$ref'" [ "$got" = "$ref" ]
    elif [ $v = loop ] || [ $v = owner ]; then
      check "$v T=$T: same weights as serial (loss deviation $dev <= 1e-12, test acc equal)" "got '$got', serial '$ref'" \
        within "$dev" "$dacc" 1e-12
      [ "${got#* }" = "${ref#* }" ] || fail "$v T=$T: test accuracy equal to serial's" "got '$got', serial '$ref'"
    else
      check "$v T=$T: loss within $TOL relative of serial (max $dev), test acc within 0.2 pp ($dacc)" \
        "got '$got', serial '$ref'" within "$dev" "$dacc" $TOL
      worst_dp=$(awk -v a="$worst_dp" -v b="$dev" 'BEGIN { print (b > a ? b : a) }')
    fi
  done
done
echo "info: largest deviation of critical/reduction/model from serial: $worst_dp (tolerance $TOL)"

# ---- owner: serial's parameters bit for bit (SHA-256 of the final checkpoint's), at
# T = 1..4 and with a short last batch (1202 = 20 x 60 + 2: threads without rows)
if [ -x /usr/bin/python3 ]; then
  OWN=(--data $DATA --train 1202 --test 300 --epochs 2 --batch 60 --lr 0.1 --seed 2 --quiet --csv none)
  $SERIAL "${OWN[@]}" --checkpoint "$TMP/own-serial.ck" >"$TMP/out" 2>&1
  h_s=$(/usr/bin/python3 scripts/checkpoint.py --params "$TMP/own-serial.ck" 2>&1)
  for T in 1 2 3 4; do
    $BIN "${OWN[@]}" --accum owner --threads $T --checkpoint "$TMP/own-owner.ck" >"$TMP/out" 2>&1
    h_o=$(/usr/bin/python3 scripts/checkpoint.py --params "$TMP/own-owner.ck" 2>&1)
    check "owner T=$T: parameters = serial's, bit for bit (${h_o:0:16})" "serial $h_s, owner $h_o" \
      [ -n "$h_o" ] && [ "$h_o" = "$h_s" ] && [ ${#h_o} = 64 ]
    rm -f "$TMP/own-owner.ck"
  done
else
  skip "owner = serial, bit for bit" "/usr/bin/python3 missing (scripts/checkpoint.py reads the checkpoints)"
fi

# ---- reduction, owner, model: bit-identical from run to run for a given T ------------
for v in reduction owner model; do
  for T in 2 3 4; do
    again=$(run_curve $BIN "${EQ[@]}" $(variant_flags $BIN $v) --threads $T)
    check "$v T=$T: bit-identical on a second run" "first '${first[$v$T]}', second '$again'" \
      [ "$again" = "${first[$v$T]}" ]
  done
done

# ---- tiny slices: batch 16 and 5 with 8 threads (5 rows: three threads without rows) --
for b in 16 5; do
  SMALL=(--data $DATA --train 1000 --test 300 --epochs 2 --batch $b --lr 0.05 --seed 3)
  ref=$(run_curve $SERIAL "${SMALL[@]}")
  for v in $(variants $BIN); do
    got=$(run_curve $BIN "${SMALL[@]}" $(variant_flags $BIN $v) --threads 8)
    read -r dev dacc <<<"$(maxdev "$got" "$ref")"
    check "$v, batch $b, 8 threads: matches serial (loss dev $dev)" "got '$got', serial '$ref'" within "$dev" "$dacc" $TOL
  done
done

# ---- other activations, deeper nets, resampled images, full batch (3 threads) --------
cfgs=("--activation sigmoid --lr 0.5" "--activation leaky-relu --lr 0.05"
      "--hidden 160,32,16 --image-size 40 --lr 0.05" "--hidden 200 --lr 0.05"
      "--batch full --lr 0.5 --epochs 3")
for cfg in "${cfgs[@]}"; do
  # shellcheck disable=SC2206
  C=(--data $DATA --train 1000 --test 300 --epochs 2 --batch 50 --seed 5 $cfg)
  ref=$(run_curve $SERIAL "${C[@]}")
  for v in $(variants $BIN); do
    got=$(run_curve $BIN "${C[@]}" $(variant_flags $BIN $v) --threads 3)
    read -r dev dacc <<<"$(maxdev "$got" "$ref")"
    if [ $v = loop ]; then   # the same weights (with --batch full: the update's K blocks)
      check "loop, 3 threads, $cfg: same weights as serial (loss dev $dev <= 1e-12, test acc equal)" \
        "got '$got', serial '$ref'" eval 'within "$dev" "$dacc" 1e-12 && [ "${got#* }" = "${ref#* }" ]'
    else
      check "$v, 3 threads, $cfg: matches serial (loss dev $dev)" "got '$got', serial '$ref'" within "$dev" "$dacc" $TOL
    fi
  done
done

# ---- the CSV row --------------------------------------------------------------------
rm -f "$CSV"
$BIN --data $DATA --train 500 --test 100 --epochs 2 --accum critical --threads 2 --csv "$CSV" --quiet >/dev/null 2>&1
row="program=$(csv_col "$CSV" program) variant=$(csv_col "$CSV" variant) threads=$(csv_col "$CSV" threads) ranks=$(csv_col "$CSV" ranks) policy=$(csv_col "$CSV" omp_wait_policy) comm=$(csv_col "$CSV" comm_seconds) sync=$(csv_col "$CSV" sync_seconds)"
check "CSV row: program, variant, threads, ranks, wait policy, comm/sync columns ($row)" "$row" \
  awk -v r="$row" 'BEGIN { split(r, f, " "); for (i in f) { split(f[i], kv, "="); v[kv[1]] = kv[2] }
    exit !(v["program"] == "openmp" && v["variant"] == "critical" && v["threads"] == 2 && v["ranks"] == 1 &&
           v["policy"] == "passive" && v["comm"] == 0 && v["sync"] ~ /^[0-9.e+-]+$/ && v["sync"] > 0) }'

# ---- default thread count: OMP_NUM_THREADS, else every core -------------------------
OMP_NUM_THREADS=3 $BIN --data $DATA --train 300 --test 50 --epochs 1 --csv "$CSV" --quiet >/dev/null 2>&1
check "OMP_NUM_THREADS=3 gives 3 threads" "threads=$(csv_col "$CSV" threads)" [ "$(csv_col "$CSV" threads)" = 3 ]
$BIN --data $DATA --train 300 --test 50 --epochs 1 --csv "$CSV" --quiet >/dev/null 2>&1
check "without OMP_NUM_THREADS: one thread per core ($(nproc))" "threads=$(csv_col "$CSV" threads)" \
  [ "$(csv_col "$CSV" threads)" = "$(nproc)" ]

# ---- more threads than cores without OMP_WAIT_POLICY: a one-line warning ------------
over=$(( $(nproc) + 1 ))
env -u OMP_WAIT_POLICY $BIN --data $DATA --train 200 --test 50 --epochs 1 --threads $over --csv none --quiet \
  >/dev/null 2>"$TMP/err"
check "$over threads, OMP_WAIT_POLICY unset: warns to set passive" "stderr: $(head -c 200 "$TMP/err")" \
  grep -q 'OMP_WAIT_POLICY=passive' "$TMP/err"
$BIN --data $DATA --train 200 --test 50 --epochs 1 --threads $over --csv none --quiet >/dev/null 2>"$TMP/err"
check "$over threads, OMP_WAIT_POLICY=passive: no warning" "stderr: $(head -c 200 "$TMP/err")" [ ! -s "$TMP/err" ]

# ---- command line: the shared contract, then this trainer's own flags ---------------
BIN=$BIN tests/test_cli.sh >"$TMP/cli" 2>&1
grep -E '^(PASS|FAIL|SKIP) ' "$TMP/cli" | sed 's/^\(PASS\|FAIL\|SKIP\) /\1 openmp: /'
FAILS=$((FAILS + $(grep -c '^FAIL ' "$TMP/cli")))
expect_error "--threads 0 rejected" "--threads" $BIN --csv "$TMP/err.csv" --data $DATA --threads 0
expect_error "--threads abc rejected" "--threads" $BIN --csv "$TMP/err.csv" --data $DATA --threads abc
expect_error "--threads 100000 rejected" "--threads" $BIN --csv "$TMP/err.csv" --data $DATA --threads 100000
expect_error "--accum magic rejected" "--accum" $BIN --csv "$TMP/err.csv" --data $DATA --accum magic
expect_error "--accum without a value rejected" "--accum" $BIN --csv "$TMP/err.csv" --data $DATA --accum

# ---- AddressSanitizer/UBSan build: uneven slices, empty slices, every mode ----------
SAN_OMP=$(sanitized openmp/openmp)
if [ -x "$SAN_OMP" ]; then
  for v in $(variants $BIN); do
    "$SAN_OMP" --data $DATA --train 400 --test 100 --batch 5 --threads 8 --epochs 1 $(variant_flags $BIN $v) \
      --predict 1 --csv "$TMP/asan.csv" >"$TMP/asan" 2>&1; rc=$?
    "$SAN_OMP" --data $DATA --train 1100 --test 100 --batch full --threads 3 --epochs 1 $(variant_flags $BIN $v) \
      --activation sigmoid --image-size 40 --hidden 32,16,8 --csv none >>"$TMP/asan" 2>&1; rc2=$?
    clean() { [ $rc -eq 0 ] && [ $rc2 -eq 0 ] && ! grep -qE 'ERROR|runtime error' "$TMP/asan"; }
    check "sanitizer build, $v: batch 5 x 8 threads, full batch of 1,100 x 3 threads, sigmoid, 4 layers" \
      "exit $rc/$rc2: $(grep -m3 -E 'ERROR|runtime error' "$TMP/asan")" clean
  done
else
  fail "sanitizer build" "$SAN_OMP not built (make test builds it when OpenMP is available)"
fi
finish
