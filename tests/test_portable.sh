#!/usr/bin/env bash
# tests/test_portable.sh — the portable build (make PORTABLE=1: -march=x86-64-v3, no
# AVX-512) is real, tested code: it builds every CPU trainer and the kernel test under
# build/portable/, runs the kernel test (common/gemm.h's portable path, bit for bit the
# fmaf chain) and one golden configuration per trainer, whose loss curves must equal the
# native build's pinned ones (tests/golden.txt): the portable path computes the same bits.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
# make test SANITIZE=1 (tests/run-sanitized.sh): what this test checks is a second optimized
# build and its bits, not something a sanitizer looks at; the native make test runs it
if [ "${PARTRAIN_SANITIZE:-0}" = 1 ]; then
  skip "portable build" "under SANITIZE=1: the portable build is a separate, unsanitized -O3 build (make test and make test PORTABLE=1 check it)"
  finish
fi

if ! make --no-print-directory -k PORTABLE=1 cpu build/portable/tests/bin/test_gemm >"$TMP/build.log" 2>&1; then
  fail "portable build (make PORTABLE=1)" "$(grep -m3 -E 'error|Error' "$TMP/build.log" | tr '\n' ' ')"
  finish
fi
pass "portable build (make PORTABLE=1 all: -march=x86-64-v3)"
if grep -q avx512 <(build/portable/tests/bin/test_gemm 2>&1 | head -1); then
  fail "portable kernel path" "build/portable/tests/bin/test_gemm runs the AVX-512 path"
fi
build/portable/tests/bin/test_gemm
# one configuration per MLP trainer (odd shapes and K blocks where it has them): the same
# bits as the native build
PARTRAIN_GOLDEN_BIN_DIR=build/portable tests/test_golden.sh \
  --only '^(serial-odd|serial-sigmoid|openmp-loop-odd-t2|openmp-model-t2|mpi-allreduce-odd-p2|pipeline-m4-p2|hybrid-allreduce-odd-2x1)$' |
  sed 's/^\(PASS\|FAIL\|SKIP\) golden /\1 portable golden /'
# the CNN: its convolution has its own AVX-512 code, whose backward sums the taps in
# another order than the plain loops (docs/cnn.md), so the portable build is not bit-
# identical: the same run must end within 1e-5 relative loss and 0.5 points of accuracy
if [ -x cnn/cnn ] && [ -x build/portable/cnn/cnn ] && command -v mpirun >/dev/null; then
  conf=(--data data/mnist --train 2000 --test 500 --epochs 3 --quiet --threads 2)
  for b in cnn/cnn build/portable/cnn/cnn; do
    OMP_WAIT_POLICY=passive scripts/mpirun.sh --bind-to-none 1 "$b" "${conf[@]}" --csv "$TMP/cnn.csv" </dev/null >"$TMP/cnn.out" 2>&1 ||
      fail "portable cnn vs native" "$b failed: $(tail -n 2 "$TMP/cnn.out" | tr '\n' ' ')"
  done
  read -r l1 l2 a1 a2 <<<"$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { l[NR - 1] = $c["final_train_loss"]; a[NR - 1] = $c["test_accuracy"] } END { print l[1], l[2], a[1], a[2] }' "$TMP/cnn.csv")"
  check "portable cnn 1x2 vs native: final loss within 1e-5 relative, accuracy within 0.5 points" \
    "loss $l2 vs $l1, accuracy $a2 vs $a1" \
    awk -v a="$l1" -v b="$l2" -v x="$a1" -v y="$a2" 'BEGIN { d = (a - b) / a; if (d < 0) d = -d; e = x - y; if (e < 0) e = -e;
      exit !(a != "" && b != "" && d <= 1e-5 && e <= 0.5) }'
else
  skip "portable cnn vs native" "cnn/cnn, build/portable/cnn/cnn or mpirun missing"
fi
finish
