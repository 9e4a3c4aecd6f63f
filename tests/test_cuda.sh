#!/usr/bin/env bash
# tests/test_cuda.sh — the CUDA trainer without a GPU. cuda/cuda.cu compiled a second way,
# as C++ on the CPU emulation of cuda/cuda_emu.h (cuda/cuda-emu: every block on the CPU,
# one fiber per thread, __syncthreads() a real barrier), reproduces serial's per-epoch
# loss with the naive and the tiled kernels (tile 16 and 32; every size here is not a
# multiple of the tile: 729 inputs, layers 40, 24, 33, 17, 9, 10, batches of 50 and 37
# with short last batches), and so does the MPI build with 1 and 2 ranks. A build without
# the tiled kernel's second __syncthreads() must fail that comparison (proof that the
# emulation catches real kernel races). --graph (one epoch captured as a graph, replayed
# every epoch: the emulation records the captured launches and replays them) is
# bit-identical to serial, hence to the plain path, for every kernel, and replays each
# epoch's kernels with no direct launch per step. The sanitizer build trains cleanly; the command
# line follows the suite's contract; and the real nvcc build, on a machine without a
# GPU, prints one line with the CUDA runtime's error and exits 3.
#
# Tolerances (stated here and in docs/cuda.md):
#   emulation, one process (and MPI with 1 rank): bit-identical to serial. Each element
#     of each product is the same fmaf chain over k in the same order (the tiled kernel
#     stops at K inside its last tile instead of adding padded zeros), and the epilogues,
#     softmax + cross-entropy, bias sums and update are serial's operations; the
#     emulation uses the host's expf/logf, as serial does.
#   emulation, 2 MPI ranks: relative difference of each epoch's mean loss <= 1e-5 (the
#     gradient sum is split into two partial sums; measured 1.9e-9 on this configuration).
#   the build without the second barrier: must differ by more than 1e-5 (measured 0.10-0.13).
#   on a GPU (scripts/gpu-check.sh, not run here): 1e-4, for the device's expf/logf.
# Emulated kernels are slow (a fiber switch per thread per barrier), so the runs are small.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
DATA=data/mnist
EMU=cuda/cuda-emu
TOL=1e-5
LIMIT=$((150 * SLOWDOWN)) # seconds after which a run counts as hung

if [ ! -x $EMU ]; then
  if [ -n "$(command -v "${CXX:-g++}")" ]; then fail "$EMU built" "missing: make cuda-emu"; else skip "CUDA emulation" "no C++ compiler (apt-get install g++)"; fi
  finish
fi
[ -x serial/serial ] || { fail "serial/serial built" "missing (make all)"; finish; }

# max_rel A B: largest relative difference between two ';'-separated curves ("bad" if lengths differ)
max_rel() {
  awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, ";"); m = split(b, y, ";");
    if (n != m || n == 0) { print "bad"; exit } d = 0;
    for (i = 1; i <= n; i++) { e = (x[i] - y[i]) / x[i]; if (e < 0) e = -e; if (!(e <= d)) d = e } printf "%.3g\n", d }'
}
within() { awk -v d="$1" -v t="$TOL" 'BEGIN { exit !(d != "bad" && d + 0 <= t + 0) }'; }
# train NAME ARGS...: one run with its own CSV; sets rc and curve (train_loss_curve)
train() {
  local name=$1; shift
  rm -f "$TMP/$name.csv"
  timeout $LIMIT "$@" --csv "$TMP/$name.csv" --quiet </dev/null >"$TMP/$name.out" 2>&1; rc=$?
  [ $rc -ne 124 ] || echo "(killed after $LIMIT s: hung)" >>"$TMP/$name.out"
  curve=$( [ -f "$TMP/$name.csv" ] && csv_col "$TMP/$name.csv" train_loss_curve)
}
# same RUN LABEL REF: the last run (train RUN ...) is bit-identical to the reference curve
same() {
  check "$2: bit-identical to serial ($curve)" "exit $rc, serial $3, got ${curve:-nothing} (max rel diff $(max_rel "$3" "$curve")): $(tail -c 300 "$TMP/$1.out")" \
    [ $rc -eq 0 ] && [ -n "$curve" ] && [ "$curve" = "$3" ]
}

# ---- equivalence with serial: relu, 729-40-24-10, batches of 50 (last one 6 rows)
A=(--data $DATA --train 256 --test 100 --image-size 27 --hidden 40,24 --batch 50 --epochs 2 --lr 0.05)
train serial-a serial/serial "${A[@]}"; ref_a=$curve
check "serial reference run (relu 729-40-24-10)" "exit $rc: $(tail -c 300 "$TMP/serial-a.out")" [ $rc -eq 0 ] && [ -n "$ref_a" ]
# every kernel the emulation build lists (cuda/cuda-emu --list-variants: naive, tiled16, tiled32)
while IFS=$'\t' read -r name vflags _; do
  read -r -a vargs <<<"$vflags"
  train "$name" $EMU "${A[@]}" "${vargs[@]}"; same "$name" "$name, relu 729-40-24-10" "$ref_a"
done < <($EMU --list-variants)
check "CSV row: program cuda-emu, variant tiled32" "$(head -c 300 "$TMP/tiled32.csv")" \
  [ "$(csv_col "$TMP/tiled32.csv" program)" = cuda-emu ] && [ "$(csv_col "$TMP/tiled32.csv" variant)" = tiled32 ]

# ---- --graph: the same runs with the epoch captured once and replayed (the emulation's
# launch counter, CUDA_EMU_STATS, shows what ran: 256 samples in batches of 50 = 6 steps
# of 14 launches (2 hidden layers: gather, 3 forward products, softmax, loss sum, 3 x
# weight product + bias sum, 2 delta products), captured once, replayed in each of the 2
# epochs, none of them launched directly)
while IFS=$'\t' read -r name vflags _; do
  read -r -a vargs <<<"$vflags"
  rm -f "$TMP/stats-$name"
  CUDA_EMU_STATS="$TMP/stats-$name" train "$name-graph" $EMU "${A[@]}" "${vargs[@]}" --graph
  same "$name-graph" "$name --graph, relu 729-40-24-10 (equal to the plain path)" "$ref_a"
  stats=$(cat "$TMP/stats-$name" 2>/dev/null)
  check "$name --graph: 84 launches captured once, 2 graph launches replaying 168, no per-step direct launch ($stats)" \
    "counter: ${stats:-nothing}" grep -q "graph_launches=2 replayed_launches=168 captured_launches=84" <<<"$stats"
done < <($EMU --list-variants)
direct_plain=$(CUDA_EMU_STATS=/dev/stdout $EMU "${A[@]}" --kernel naive --csv none --quiet | sed -n 's/.*direct_launches=\([0-9]*\).*/\1/p')
direct_graph=$(sed -n 's/.*direct_launches=\([0-9]*\).*/\1/p' "$TMP/stats-naive")
check "naive: the 168 training launches of the plain path are gone with --graph (direct $direct_plain -> $direct_graph)" \
  "direct launches: plain ${direct_plain:-?}, graph ${direct_graph:-?}" \
  [ -n "$direct_plain" ] && [ -n "$direct_graph" ] && [ $((direct_plain - direct_graph)) -eq 168 ]
check "CSV row of a --graph run: variant tiled32+graph" "$(head -c 300 "$TMP/tiled32-graph.csv")" \
  [ "$(csv_col "$TMP/tiled32-graph.csv" variant)" = tiled32+graph ]

# ---- other activations and shapes: 3 hidden layers (one narrower than the 10 classes)
B=(--data $DATA --train 222 --test 61 --image-size 27 --hidden 33,17,9 --batch 37 --epochs 2)
train serial-b serial/serial "${B[@]}" --activation leaky-relu --lr 0.05; ref_b=$curve
train leaky $EMU "${B[@]}" --activation leaky-relu --lr 0.05 --kernel tiled --tile 32
same leaky "tiled32, leaky-relu 729-33-17-9-10" "$ref_b"
train serial-c serial/serial "${B[@]}" --activation sigmoid --lr 0.5; ref_c=$curve
train sigmoid $EMU "${B[@]}" --activation sigmoid --lr 0.5 --kernel naive
same sigmoid "naive, sigmoid 729-33-17-9-10" "$ref_c"
train serial-d serial/serial "${A[@]}" --batch full --lr 0.5; ref_d=$curve
train full $EMU "${A[@]}" --batch full --lr 0.5 --kernel tiled --tile 16
same full "tiled16, --batch full (256 rows)" "$ref_d"
train full-graph $EMU "${A[@]}" --batch full --lr 0.5 --kernel naive --graph
same full-graph "naive --graph, --batch full (one step per epoch)" "$ref_d"

# ---- the emulation catches a missing barrier: the build without the second __syncthreads()
BUG=tests/bin/cuda-emu-bug
if [ -x $BUG ]; then
  for t in 16 32; do
    train bug$t $BUG "${A[@]}" --kernel tiled --tile $t
    d=$(max_rel "$ref_a" "$curve")
    check "without the second __syncthreads(), tiled$t fails the comparison with serial (max rel diff $d > $TOL)" \
      "exit $rc, curve ${curve:-nothing} vs serial $ref_a: the emulation did not expose the race" \
      [ $rc -eq 0 ] && [ -n "$curve" ] && ! within "$d"
  done
  train bugnaive $BUG "${A[@]}" --kernel naive
  same bugnaive "the same build, naive kernel (no barrier involved)" "$ref_a"
else
  fail "barrier-bug build" "$BUG not built (make $BUG)"
fi

# ---- the MPI build on the emulation: 1 rank bit-identical, 2 ranks within TOL
MPIEMU=cuda/cuda-mpi-emu
if [ ! -x $MPIEMU ]; then
  skip "cuda-mpi-emu" "not built (needs mpicxx: apt-get install libopenmpi-dev)"
elif ! command -v mpirun >/dev/null; then
  skip "cuda-mpi-emu" "mpirun not found (apt-get install openmpi-bin)"
else
  train mpi1 scripts/mpirun.sh 1 $MPIEMU "${A[@]}" --kernel naive
  same mpi1 "cuda-mpi-emu, 1 rank" "$ref_a"
  # 251 samples in batches of 50: the last batch has 1 row, so rank 1's part of it is
  # empty (it still joins the Allreduce with zero gradients)
  train serial-e serial/serial "${A[@]}" --train 251; ref_e=$curve
  train mpi2 scripts/mpirun.sh 2 $MPIEMU "${A[@]}" --train 251 --kernel naive
  d=$(max_rel "$ref_e" "$curve")
  check "cuda-mpi-emu, 2 ranks (one with an empty part of the last batch): per-epoch loss within $TOL of serial (max rel diff $d)" \
    "exit $rc, serial $ref_e, got ${curve:-nothing}: $(tail -c 300 "$TMP/mpi2.out")" [ $rc -eq 0 ] && [ -n "$ref_e" ] && within "$d"
  check "cuda-mpi-emu, 2 ranks: replicas identical, CSV ranks = 2" "$(tail -c 300 "$TMP/mpi2.out")" \
    grep -q "replicas identical" "$TMP/mpi2.out" && [ "$(csv_col "$TMP/mpi2.csv" ranks)" = 2 ]
  expect_error "cuda-mpi-emu refuses --graph (host work every step), one line" "--graph" --label cuda-mpi-emu \
    scripts/mpirun.sh 2 $MPIEMU --data $DATA --graph
fi

# ---- AddressSanitizer + UBSan build of the emulation (kernels' out-of-bounds accesses included)
SAN_EMU=$(sanitized cuda/cuda-emu)
if [ -x "$SAN_EMU" ]; then
  for k in "naive" "tiled --tile 16"; do
    timeout $LIMIT "$SAN_EMU" --data $DATA --train 80 --test 30 --image-size 20 --hidden 21,13 --batch 25 \
      --epochs 1 --kernel $k --predict 1 --csv none >"$TMP/asan" 2>&1; rc=$?
    check "sanitizer build trains cleanly (--kernel $k)" "exit $rc: $(grep -m3 -E 'ERROR|runtime error' "$TMP/asan")" \
      [ $rc -eq 0 ] && ! grep -qE 'ERROR|runtime error' "$TMP/asan"
  done
else
  fail "sanitizer build" "$SAN_EMU not built (make test builds it: make SANITIZE=1 cuda-emu)"
fi

# ---- command line: the suite's contract, plus --kernel/--tile
help=$($EMU --help); rc=$?
missing=$(for f in --data --train --test --image-size --hidden --activation --batch --epochs --lr --seed --csv --predict --quiet --kernel --tile --graph; do
  grep -qE "^ +$f" <<<"$help" || echo "$f"; done)
check "--help exits 0 and lists every flag, --kernel, --tile and --graph included" "exit $rc, missing: $missing" [ $rc -eq 0 ] && [ -z "$missing" ]
undocumented=$(for f in --kernel --tile; do grep -q -- "\`$f" README.md || echo "$f"; done)
check "README documents --kernel and --tile" "not in README: $undocumented" [ -z "$undocumented" ]
# expect_error BIN NAME KEYWORD ARGS...: exit 2, one stderr line containing KEYWORD, no CSV
expect_error "emulation refuses --kernel cublas (no fake cuBLAS)" "cublas" $EMU --data $DATA --kernel cublas
expect_error "--kernel magic rejected" "--kernel" $EMU --data $DATA --kernel magic
expect_error "--tile 8 rejected" "--tile" $EMU --data $DATA --tile 8
expect_error "--train beyond the file rejected" "8000" $EMU --data $DATA --train 100000
expect_error "--batch larger than the training set rejected" "--batch" $EMU --data $DATA --train 100 --batch 200
expect_error "missing data directory names the file" "/nonexistent/dir" $EMU --data /nonexistent/dir
out=$($EMU --data $DATA --train 60 --test 3 --image-size 28 --hidden 12 --batch 20 --epochs 1 --kernel naive --predict 2 --csv none 2>&1)
check "--predict 2 prints two labelled ASCII images" "$(head -c 300 <<<"$out")" \
  [ "$(grep -c 'predicted [0-9], true [0-9]' <<<"$out")" -eq 2 ]

# ---- the real build without a GPU: one line with the runtime's error, exit 3, no CSV
if [ ! -x cuda/cuda ] && [ "${PARTRAIN_SANITIZE:-0}" = 1 ]; then
  skip "cuda/cuda without a GPU" "not built under SANITIZE=1 (ASan cannot instrument nvcc's device code)"
elif [ ! -x cuda/cuda ]; then
  skip "cuda/cuda without a GPU" "cuda/cuda not built (nvcc not found)"
elif nvidia-smi -L 2>/dev/null | grep -q GPU; then
  skip "cuda/cuda without a GPU" "this machine has a GPU: run scripts/gpu-check.sh"
else
  rm -f "$TMP/gpu.csv"
  cuda/cuda --data $DATA --epochs 1 --csv "$TMP/gpu.csv" >"$TMP/out" 2>"$TMP/err"; rc=$?
  check "cuda/cuda without a GPU: exit 3, one stderr line with the CUDA runtime's error, no CSV ($(cat "$TMP/err"))" \
    "exit $rc, $(wc -l <"$TMP/err") stderr lines, stdout $(wc -c <"$TMP/out") bytes: $(head -c 300 "$TMP/err")" \
    [ $rc -eq 3 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "no usable CUDA device: .*(cudaGetDeviceCount)" "$TMP/err" \
    && [ ! -s "$TMP/out" ] && [ ! -e "$TMP/gpu.csv" ]
  cuda/cuda --help >/dev/null 2>&1; rc=$?
  check "cuda/cuda --help works without a GPU" "exit $rc" [ $rc -eq 0 ]
  expect_error "cuda/cuda: bad flags are reported (exit 2) before the device is needed" "--tile" cuda/cuda --data $DATA --tile 64
  if [ -x cuda/cuda-mpi ] && command -v mpirun >/dev/null; then
    timeout $LIMIT scripts/mpirun.sh 2 cuda/cuda-mpi --data $DATA --epochs 1 --csv "$TMP/gpu.csv" >"$TMP/out" 2>"$TMP/err"; rc=$?
    check "cuda/cuda-mpi, 2 ranks without a GPU: exit 3, the runtime's error printed once" \
      "exit $rc: $(head -c 300 "$TMP/err")" [ $rc -eq 3 ] && [ "$(grep -c 'no usable CUDA device' "$TMP/err")" -eq 1 ]
  fi
fi
finish
