#!/usr/bin/env bash
# tests/test_e2e.sh — serial end to end on real data: accuracy on the MNIST digits,
# bit-identical reruns, seed sensitivity, one CSV row per run, the less common paths
# (--image-size, --batch full, sigmoid, leaky-relu, --gemm blas), and a run of the
# AddressSanitizer/UBSan build.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
BIN=${BIN:-serial/serial}
DATA=data/mnist
CSV=$TMP/runs.csv

# accuracy: 3 epochs on the 8,000 real MNIST digits reach >= 92% on the 2,000 test digits
$BIN --data $DATA --epochs 3 --lr 0.1 --batch 32 --csv "$CSV" --quiet >"$TMP/out" 2>&1
acc=$(csv_col "$CSV" test_accuracy)
check "MNIST digits, 3 epochs: test accuracy >= 92% (got $acc%)" "$(tail -3 "$TMP/out")" \
  awk -v a="$acc" 'BEGIN { exit !(a >= 92) }'
check "one CSV row per run, header once" "$(csv_rows "$CSV") rows" [ "$(csv_rows "$CSV")" -eq 1 ]

# determinism: the same seed twice gives bit-identical losses (printed with 17 digits)
$BIN --data $DATA --train 2000 --epochs 2 --seed 7 --csv "$CSV" --quiet >/dev/null
$BIN --data $DATA --train 2000 --epochs 2 --seed 7 --csv "$CSV" --quiet >/dev/null
$BIN --data $DATA --train 2000 --epochs 2 --seed 8 --csv "$CSV" --quiet >/dev/null
a=$(csv_col "$CSV" train_loss_curve 2); b=$(csv_col "$CSV" train_loss_curve 3); c=$(csv_col "$CSV" train_loss_curve 4)
same=0; [ -n "$a" ] && [ "$a" = "$b" ] && same=1
check "same seed: bit-identical loss curve ($a)" "$a vs $b" [ $same = 1 ]
check "different seed: different loss curve" "$a vs $c" [ "$a" != "$c" ]
check "CSV rows accumulate, one per run" "$(csv_rows "$CSV") rows" [ "$(csv_rows "$CSV")" -eq 4 ]

# every curve decreases for each activation (2 epochs, 2,000 samples)
for act in relu sigmoid leaky-relu; do
  lr=0.05; [ $act = sigmoid ] && lr=0.5
  $BIN --data $DATA --train 2000 --test 500 --epochs 3 --activation $act --lr $lr --csv "$CSV" --quiet >/dev/null
  curve=$(csv_col "$CSV" train_loss_curve)
  check "$act trains: loss decreases ($curve)" "$curve" \
    awk -v c="$curve" 'BEGIN { n = split(c, v, ";"); exit !(n == 3 && v[3] < v[2] && v[2] < v[1]) }'
done

# deeper/narrower net, resampled images, full-batch gradient descent
$BIN --data $DATA --train 1000 --test 200 --epochs 1 --image-size 56 --hidden 64,32,16 --csv "$CSV" --quiet >"$TMP/out" 2>&1
check "--image-size 56 --hidden 64,32,16 runs (3136 inputs)" "$(cat "$TMP/out")" \
  grep -q "MLP 3136-64-32-16-10" "$TMP/out"
check "--image-size is recorded" "$(csv_col "$CSV" image_size)" [ "$(csv_col "$CSV" image_size)" = 56 ]
$BIN --data $DATA --train 1000 --test 200 --epochs 3 --batch full --lr 0.5 --csv "$CSV" --quiet >/dev/null
curve=$(csv_col "$CSV" train_loss_curve)
check "--batch full: gradient descent lowers the loss ($curve)" "batch $(csv_col "$CSV" batch)" \
  awk -v c="$curve" -v b="$(csv_col "$CSV" batch)" 'BEGIN { split(c, v, ";"); exit !(b == 1000 && v[3] < v[1]) }'

# the BLAS kernel computes the same training (summation order differs: 1e-4 relative)
if $BIN --help | grep -q 'not built in'; then
  skip "--gemm blas matches the own kernel" "serial built without OpenBLAS (apt-get install libopenblas-dev)"
else
  $BIN --data $DATA --train 2000 --test 500 --epochs 3 --csv "$CSV" --quiet >/dev/null
  own=$(csv_col "$CSV" train_loss_curve)
  OPENBLAS_NUM_THREADS=1 $BIN --data $DATA --train 2000 --test 500 --epochs 3 --gemm blas --csv "$CSV" --quiet >/dev/null
  blas=$(csv_col "$CSV" train_loss_curve)
  check "--gemm blas matches the own kernel within 1e-4 relative ($blas)" "own $own" \
    awk -v a="$own" -v b="$blas" 'BEGIN { n = split(a, x, ";"); split(b, y, ";"); ok = n == 3;
      for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (!(d <= 1e-4 * x[i])) ok = 0 } exit !ok }'
fi

# the sanitizer build trains without a report (ASan/UBSan abort with non-zero status)
SAN_SERIAL=$(sanitized serial/serial)
if [ -x "$SAN_SERIAL" ]; then
  "$SAN_SERIAL" --data $DATA --train 600 --test 100 --batch 50 --epochs 2 --predict 1 --csv "$TMP/asan.csv" >"$TMP/asan" 2>&1
  rc=$?
  grep -qE 'ERROR|runtime error' "$TMP/asan" && rc=99   # a report without a failing exit still fails
  check "AddressSanitizer/UBSan build trains cleanly" "exit $rc: $(grep -m3 -E 'ERROR|runtime error' "$TMP/asan")" \
    [ $rc -eq 0 ]
  "$SAN_SERIAL" --data $DATA --train 600 --test 100 --epochs 1 --image-size 40 --batch full --activation sigmoid --csv none >"$TMP/asan" 2>&1
  rc=$?
  check "sanitizer build: resampling, full batch, sigmoid" "exit $rc: $(grep -m3 -E 'ERROR|runtime error' "$TMP/asan")" [ $rc -eq 0 ]
else
  fail "sanitizer build" "$SAN_SERIAL not built (make test builds it: make SANITIZE=1 serial/serial)"
fi
finish
