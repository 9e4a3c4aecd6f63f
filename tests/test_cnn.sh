#!/usr/bin/env bash
# tests/test_cnn.sh — cnn/cnn (seed report 003's CNN, MPI ranks x OpenMP threads): first
# the unit tests of tests/test_cnn.c (tests/bin/test_cnn), then end to end: ranks x
# threads P x T in {1x1, 1x2, 2x1, 2x2} train the same model (2 epochs), the 5-epoch
# accuracy on the MNIST digits in every configuration, --sync and
# --batch-per-rank semantics, other image sizes and filter counts, the error paths, and a
# run of the AddressSanitizer/UBSan build with 2 ranks x 2 threads.
#
# Tolerances (stated here and in docs/cnn.md):
#   P x T vs 1 x 1: relative difference of each epoch's mean loss <= 1e-5. Each thread sums
#     the gradient over its block of the rank's samples, the blocks' sums are added in
#     thread order and the ranks' sums then added, so float rounding differs from 1 x 1's
#     one sum per element, and a rounding difference can flip a near-tie of the
#     max-pooling, which moves the loss by more than rounding alone; measured at most
#     8.2e-8 over seeds 1, 3, 7, 42 and P = 2, 3, 4 (2 epochs, this configuration), a
#     margin of 120x.
#   1 x 2 vs 2 x 1: bit-identical. Both cut the batch into the same two blocks and add the
#     two blocks' sums once (a sum of two operands has one order).
#   mpirun -np 1 == the plain binary exactly; a rerun of 1 x 2 is bit-identical.
#   allreduce vs reduce-bcast (P = 2): bit-identical (a sum of two operands has one order).
#   accuracy: every configuration >= 95% after 5 epochs (8,000 MNIST digits, lr 0.2,
#     batch 32) and within 0.2 percentage points of 1x1 at every epoch.
# The runs with more threads than cores (2x2 on 2 cores) use OMP_WAIT_POLICY=passive.
# Needs mpirun and mpicc (OpenMPI); without them every check is skipped with the reason.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
DATA=data/mnist
RUN=scripts/mpirun.sh
TOL=1e-5
LIMIT=$((120 * SLOWDOWN)) # seconds after which a run counts as hung

if ! command -v mpirun >/dev/null || ! command -v "${MPICC:-mpicc}" >/dev/null; then
  skip "CNN trainer" "mpirun/mpicc not found (apt-get install openmpi-bin libopenmpi-dev)"
  finish
fi
[ -x cnn/cnn ] || { fail "cnn/cnn built" "missing (make all)"; finish; }
CSV=$TMP/runs.csv

# ---- the unit tests (tests/test_cnn.c, ASan/UBSan build): their PASS/FAIL lines
if [ -x tests/bin/test_cnn ]; then
  timeout $LIMIT tests/bin/test_cnn >"$TMP/unit" 2>&1; rc=$?
  grep -E '^(PASS|FAIL|SKIP) ' "$TMP/unit"
  FAILS=$((FAILS + $(grep -c '^FAIL ' "$TMP/unit")))
  if [ $rc -ne 0 ] && ! grep -q '^FAIL ' "$TMP/unit"; then
    fail "tests/bin/test_cnn" "exit $rc without a FAIL line: $(tail -n 5 "$TMP/unit")"
  fi
else
  fail "tests/bin/test_cnn built" "missing (make tests/bin/test_cnn)"
fi
# the convolution's paths give the same bits: this CPU's (AVX-512 or AVX2) and the 16-lane
# loops of a CPU without either (tests/bin/test_cnn_loops, built with -mno-avx2)
if [ -x tests/bin/test_cnn_loops ]; then
  timeout $LIMIT tests/bin/test_cnn_loops >"$TMP/unit-loops" 2>&1
  native=$(sed -n 's/^cnn conv backward digest (\(.*\)): \([0-9a-f]*\)$/\1 \2/p' "$TMP/unit")
  loops=$(sed -n 's/^cnn conv backward digest (\(.*\)): \([0-9a-f]*\)$/\1 \2/p' "$TMP/unit-loops")
  check "cnn conv backward: the ${native% *} kernel and the 16-lane loops give the same bits (14 sizes, 9 filters)" \
    "native '$native', loops '$loops'" eval '[ -n "${native##* }" ] && [ "${loops% *}" = "16-lane loops" ] && [ "${native##* }" = "${loops##* }" ]'
  grep -E '^FAIL ' "$TMP/unit-loops" | sed 's/^FAIL /FAIL loops build: /'
  FAILS=$((FAILS + $(grep -c '^FAIL ' "$TMP/unit-loops")))
else
  fail "tests/bin/test_cnn_loops built" "missing (make tests/bin/test_cnn_loops)"
fi

# run PxT ARGS...: one run with P ranks x T threads, its row appended to $CSV
run() {
  local p=${1%x*} t=${1#*x}; shift
  local env=() bind=()
  [ "$t" -gt 1 ] && bind=(--bind-to-none)
  [ $((p * t)) -gt "$(nproc)" ] && env=(OMP_WAIT_POLICY=passive)
  [ $((p * t)) -gt "$(nproc)" ] && [ "$p" -le "$(nproc)" ] && env+=("MPIRUN_ARGS=--mca mpi_yield_when_idle 1")
  env "${env[@]}" timeout $LIMIT $RUN "${bind[@]}" "$p" cnn/cnn --threads "$t" --csv "$CSV" --quiet "$@" \
    >"$TMP/out" 2>&1 || { echo "run $p x $t failed: $(tail -n 3 "$TMP/out")"; return 1; }
}
# col COLUMN: that column of the last CSV row
col() { csv_col "$CSV" "$1"; }
# max_rel A B: largest relative difference between two ';'-separated curves ("bad" if lengths differ)
max_rel() {
  awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, ";"); m = split(b, y, ";");
    if (n != m || n == 0) { print "bad"; exit } d = 0;
    for (i = 1; i <= n; i++) { e = (x[i] - y[i]) / x[i]; if (e < 0) e = -e; if (!(e <= d)) d = e } printf "%.3g\n", d }'
}
within() { awk -v d="$1" -v t="$2" 'BEGIN { exit !(d != "bad" && d <= t) }'; }

# ---- equivalence: 2 epochs on 2,002 digits (the last batch of 18 rows is split too)
EQ=(--data $DATA --train 2002 --test 500 --epochs 2 --lr 0.1)
cnn/cnn "${EQ[@]}" --csv "$CSV" --quiet >"$TMP/out" 2>&1
ref=$(col train_loss_curve)
check "plain binary (no mpirun): trains, 2-epoch loss curve ($ref)" "$(tail -n 3 "$TMP/out")" [ -n "$ref" ]
run 1x1 "${EQ[@]}" && c=$(col train_loss_curve)
check "mpirun -np 1: bit-identical to the plain binary" "$ref vs $c" [ "$c" = "$ref" ]
run 1x2 "${EQ[@]}" && c12=$(col train_loss_curve)
d=$(max_rel "$ref" "$c12")
check "1 rank x 2 threads: per-epoch loss within $TOL of 1 x 1 (max rel diff $d)" "$ref vs $c12" within "$d" $TOL
check "1 rank x 2 threads: not trivially equal to 1 x 1 (the thread sums round differently)" "$c12" [ "$c12" != "$ref" ]
run 1x2 "${EQ[@]}" && c=$(col train_loss_curve)
check "1 rank x 2 threads: a rerun is bit-identical (fixed-order sum of the threads)" "$c12 vs $c" [ "$c" = "$c12" ]
run 2x1 "${EQ[@]}" && c21=$(col train_loss_curve)
d=$(max_rel "$ref" "$c21")
check "2 ranks x 1 thread: per-epoch loss within $TOL of 1 x 1 (max rel diff $d)" "$ref vs $c21" within "$d" $TOL
check "2 ranks x 1 thread: bit-identical to 1 rank x 2 threads (the same two block sums added)" "$c12 vs $c21" \
  [ "$c21" = "$c12" ]
run 2x2 "${EQ[@]}" && c=$(col train_loss_curve)
d=$(max_rel "$ref" "$c")
check "2 ranks x 2 threads: per-epoch loss within $TOL of 1 x 1 (max rel diff $d)" "$ref vs $c" within "$d" $TOL
check "2 x 2 records ranks 2, threads 2, OMP_WAIT_POLICY passive" "$(col ranks) $(col threads) $(col omp_wait_policy)" \
  [ "$(col ranks) $(col threads) $(col omp_wait_policy)" = "2 2 passive" ]
conv=$(sed -n 's/.*| conv us\/sample \([^ ]*\) |.*/\1/p' "$TMP/out")
check "2 x 2 summary: conv us/sample of each of the 4 workers, all positive ($conv)" "$(tail -n 1 "$TMP/out")" \
  awk -v c="$conv" 'BEGIN { n = split(c, v, ","); ok = n == 4; for (i = 1; i <= n; i++) ok = ok && v[i] + 0 > 0; exit !ok }'
run 2x1 "${EQ[@]}" --sync reduce-bcast && c=$(col train_loss_curve)
check "--sync reduce-bcast: bit-identical to allreduce (2 ranks)" "$c21 vs $c" [ "$c" = "$c21" ]
check "CSV variant is the --sync mode" "$(col variant)" [ "$(col variant)" = reduce-bcast ]
run 2x1 "${EQ[@]}" --batch-per-rank 16 && c=$(col train_loss_curve)
check "--batch-per-rank 16 on 2 ranks = --batch 32: bit-identical, CSV batch $(col batch)" "$c21 vs $c" \
  [ "$c" = "$c21" ] && [ "$(col batch)" = 32 ]
run 2x1 "${EQ[@]}" --batch-per-rank 32 && c=$(col train_loss_curve)
cnn/cnn "${EQ[@]}" --batch 64 --csv "$CSV" --quiet >/dev/null 2>&1 && r64=$(col train_loss_curve)
d=$(max_rel "$r64" "$c")
check "--batch-per-rank 32 on 2 ranks = global batch 64: matches 1 x 1 --batch 64 within $TOL ($d)" "$r64 vs $c" \
  within "$d" $TOL

# ---- accuracy: 5 epochs on the 8,000 MNIST digits, every configuration
ACC=(--data $DATA --epochs 5 --lr 0.2 --batch 32)
acc_ref=""
for pt in 1x1 1x2 2x1 2x2; do
  if ! run $pt "${ACC[@]}"; then fail "$pt: 5 epochs" "$(tail -n 3 "$TMP/out")"; continue; fi
  a=$(col test_acc_curve)
  [ -z "$acc_ref" ] && acc_ref=$a
  check "$pt: test accuracy >= 95% after 5 epochs, within 0.2 pp of 1 x 1 every epoch ($a)" "1 x 1: $acc_ref" \
    awk -v a="$a" -v r="$acc_ref" 'BEGIN { n = split(a, x, ";"); m = split(r, y, ";"); ok = n == 5 && m == 5 && x[5] >= 95;
      for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (!(d <= 0.2)) ok = 0 } exit !ok }'
done

# ---- other shapes: more filters, resampled and odd-sized images (the layer sizes follow)
cnn/cnn --data $DATA --train 1000 --test 200 --epochs 2 --lr 0.1 --image-size 40 --filters 4 --csv "$CSV" >"$TMP/out" 2>&1
check "--image-size 40 --filters 4: conv 38x38x4, pooled 19x19x4 = 1444 features" "$(head -n 1 "$TMP/out")" \
  grep -q "40x40x1 -conv 4x3x3-> 38x38x4 -relu, maxpool 2x2-> 19x19x4 = 1444 -dense-> 10 (14490 parameters)" "$TMP/out"
curve=$(col train_loss_curve)
check "--image-size 40 --filters 4 trains: loss decreases ($curve), hidden column $(col hidden)" "$curve" \
  awk -v c="$curve" -v h="$(col hidden)" 'BEGIN { split(c, v, ";"); exit !(v[2] < v[1] && h == "conv4") }'
run 2x2 --data $DATA --train 1000 --test 200 --epochs 2 --lr 0.1 --image-size 29 --filters 3
check "--image-size 29 (odd conv side 27: the last row/column is not pooled), 2 x 2 trains" \
  "$(tail -n 2 "$TMP/out")" grep -q "29x29x1 -conv 3x3x3-> 27x27x3 -relu, maxpool 2x2-> 13x13x3 = 507" "$TMP/out"

# ---- errors: one line from the program naming the problem, exit 2, no CSV row, no hang
# expect_error NAME KEYWORD COMMAND...
expect_error "--hidden rejected (the CNN has no hidden dense layers)" "--hidden" --label cnn cnn/cnn --data $DATA --hidden 64
expect_error "--activation sigmoid rejected (relu only)" "relu only" --label cnn cnn/cnn --data $DATA --activation sigmoid
expect_error "--filters 0 rejected" "--filters" --label cnn cnn/cnn --data $DATA --filters 0
expect_error "--threads 0 rejected" "--threads" --label cnn cnn/cnn --data $DATA --threads 0
expect_error "--image-size 3 rejected (too small for conv + pool)" "at least 4x4" --label cnn cnn/cnn --data $DATA --image-size 3
expect_error "--batch 0 rejected" "--batch" --label cnn cnn/cnn --data $DATA --batch 0
expect_error "bad --sync through mpirun: one line from rank 0" "--sync" --label cnn $RUN 2 cnn/cnn --data $DATA --sync overlap
expect_error "--batch with --batch-per-rank rejected" "not both" --label cnn $RUN 2 cnn/cnn --data $DATA --batch 10 --batch-per-rank 5
expect_error "--batch-per-rank too large for the data: clear error" "larger than the 100 training samples" --label cnn \
  $RUN 2 cnn/cnn --data $DATA --train 100 --batch-per-rank 64
expect_error "missing data directory through mpirun names the file" "/nonexistent/dir" --label cnn $RUN 2 cnn/cnn --data /nonexistent/dir
timeout $LIMIT cnn/cnn --data $DATA --epochs 0 --csv "$TMP/err.csv" >/dev/null 2>"$TMP/err"; rc=$?
ok=0; [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q -- --epochs "$TMP/err" && ok=1
check "without mpirun: bad flag gives exactly one stderr line, exit 2" "exit $rc: $(cat "$TMP/err")" [ $ok = 1 ]

# --help lists the CNN's flags, and README documents them
flags=$(cnn/cnn --help 2>/dev/null | grep -oE '^ +--[a-z-]+' | tr -d ' ' | sort -u)
undocumented=$(for f in $flags; do grep -q -- "\`$f" README.md || echo "$f"; done)
check "--help flags are documented in README" "not in README: $undocumented" [ -n "$flags" -a -z "$undocumented" ]
for f in --filters --threads --sync --batch-per-rank; do
  grep -qx -- "$f" <<<"$flags" || fail "--help lists $f" "missing"
done

# ---- the sanitizer build: 2 ranks x 2 threads (leak detection off: OpenMPI's own
# allocations at exit), then one process with two column chunks per row (--image-size 40)
bin=$(sanitized cnn/cnn)
if [ -x $bin ]; then
  ASAN_OPTIONS=detect_leaks=0 OMP_WAIT_POLICY=passive timeout $LIMIT $RUN --bind-to-none 2 $bin --threads 2 \
    --data $DATA --train 300 --test 101 --batch 25 --epochs 2 --predict 1 --csv none >"$TMP/asan" 2>&1; rc=$?
  ok=0; [ $rc -eq 0 ] && ! grep -qE 'ERROR|runtime error' "$TMP/asan" && grep -q "predicted [0-9], true" "$TMP/asan" && ok=1
  check "AddressSanitizer/UBSan build trains cleanly (2 ranks x 2 threads, --predict)" \
    "exit $rc: $(grep -m3 -E 'ERROR|runtime error' "$TMP/asan")$(tail -n 2 "$TMP/asan")" [ $ok = 1 ]
  ASAN_OPTIONS=detect_leaks=0 timeout $LIMIT $bin --data $DATA --train 200 --test 50 --batch 16 --epochs 1 \
    --image-size 40 --filters 3 --sync reduce-bcast --csv none >"$TMP/asan" 2>&1; rc=$?
  check "sanitizer build: --image-size 40 (two column chunks), reduce-bcast, no mpirun" \
    "exit $rc: $(grep -m3 -E 'ERROR|runtime error' "$TMP/asan")" [ $rc -eq 0 ]
else
  fail "cnn sanitizer build" "$bin not built (make test builds it: make SANITIZE=1 cnn/cnn)"
fi
finish
