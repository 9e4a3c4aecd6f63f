#!/usr/bin/env bash
# tests/test_portable.sh — the portable build (make PORTABLE=1: -march=x86-64-v3, no
# AVX-512) is real, tested code: it builds every CPU trainer and the kernel test under
# build/portable/, checks which kernel path each build runs, runs the kernel test
# (common/gemm.h's AVX2 path, bit for bit the fmaf chain) and one golden configuration per
# trainer, whose loss curves must equal the native build's pinned ones (tests/golden.txt):
# the AVX2 path computes the same bits, and so do the CNN's convolution loops.
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
# the path each build runs: the portable build the AVX2 one; the native build the widest
# this CPU has (a CPU with AVX2 must not fall back to the plain loops, 3x slower)
path_of() { "$1" 2>&1 | sed -n 's/^gemm path: \([a-z0-9]*\) .*/\1/p'; }
got=$(path_of build/portable/tests/bin/test_gemm)
check "portable build runs the kernel's AVX2 path" "it runs '$got'" [ "$got" = avx2 ]
if grep -qw avx512f /proc/cpuinfo; then want=avx512
elif grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then want=avx2
else want=loops; fi
got=$(path_of tests/bin/test_gemm)
check "native build runs the widest kernel path this CPU has ($want)" "it runs '$got'" [ "$got" = "$want" ]
got=$(path_of tests/bin/test_gemm_loops)
check "-DGEMM_LOOPS build runs the plain-loop path" "it runs '$got'" [ "$got" = loops ]
build/portable/tests/bin/test_gemm
# one configuration per trainer (odd shapes and K blocks where it has them): the same bits
# as the native build. The CNN's convolution has AVX-512 code of its own; without AVX-512
# its 16-lane loops give that code's bits (docs/cnn.md), so the CNN is pinned here too.
PARTRAIN_GOLDEN_BIN_DIR=build/portable tests/test_golden.sh \
  --only '^(serial-odd|serial-sigmoid|openmp-loop-odd-t2|openmp-model-t2|mpi-allreduce-odd-p2|pipeline-m4-p2|hybrid-allreduce-odd-2x1|cnn-allreduce-1x2)$' |
  sed 's/^\(PASS\|FAIL\|SKIP\) golden /\1 portable golden /'
finish
