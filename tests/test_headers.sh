#!/usr/bin/env bash
# tests/test_headers.sh — common/ and the trainers' headers say what is true:
#   - every common/*.h compiles alone (it includes what it needs, whatever the order of
#     a trainer's includes): cc, or mpicc for a header that includes <mpi.h>;
#   - every trainer's "Compile:" line (the command in its parentheses) builds the
#     trainer, run as written from the repository root into a temporary directory.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
CC=${CC:-cc} MPICC=${MPICC:-mpicc}
have_mpicc=0; command -v "$MPICC" >/dev/null && have_mpicc=1

for h in common/*.h; do
  compiler=$CC
  if grep -q '#include <mpi.h>' "$h"; then
    [ $have_mpicc = 1 ] || { skip "$h compiles alone" "$MPICC not found (apt-get install libopenmpi-dev)"; continue; }
    compiler=$MPICC
  fi
  echo "#include \"$(basename "$h")\"" | $compiler -std=c11 -fsyntax-only -Wall -march=native -Icommon -x c - \
    >"$TMP/h.err" 2>&1
  check "$h compiles alone ($compiler)" "$(head -n 3 "$TMP/h.err")" [ ! -s "$TMP/h.err" ]
done

# the Compile: lines build in parallel, one per core at a time; checked in order after
compile_line() {   # FILE: its Compile: line, run into $TMP/bin-NAME; the outcome in $TMP/c-NAME.*
  local f=$1 n line
  n=$(basename "$f" .c)
  line=$(sed -n 's/^ \* Compile: make [a-z]*  *(\(.*\))$/\1/p' "$f")
  echo "$line" >"$TMP/c-$n.line"
  [ -n "$line" ] || return 0
  [[ $line == mpicc* ]] && [ $have_mpicc = 0 ] && return 0
  bash -c "$line -o \"\$1\"" compile "$TMP/bin-$n" >"$TMP/c-$n.err" 2>&1
}
TRAINERS=(serial/serial.c openmp/openmp.c mpi/mpi.c mpi/shm.c mpi/pipeline.c hybrid/hybrid.c cnn/cnn.c)
running=0
for f in "${TRAINERS[@]}"; do
  compile_line "$f" &
  running=$((running + 1))
  if [ $running -ge "$(nproc)" ]; then wait -n; running=$((running - 1)); fi
done
wait
for f in "${TRAINERS[@]}"; do
  n=$(basename "$f" .c) line=$(cat "$TMP/c-$(basename "$f" .c).line")
  if [ -z "$line" ]; then fail "$f: Compile: line" "no ' * Compile: make T   (command)' line"; continue; fi
  [[ $line == mpicc* ]] && [ $have_mpicc = 0 ] && { skip "$f: Compile: line builds" "$MPICC not found"; continue; }
  check "$f: its Compile: line builds it ($line)" "$(head -n 3 "$TMP/c-$n.err" 2>/dev/null)" [ -x "$TMP/bin-$n" ]
done

# the next batch's prefetch (common/data.h) survives the optimiser: GCC once deleted the
# whole call as pure, and openmp's binary held no prefetch instruction
if [ "$(uname -m)" = x86_64 ] && command -v objdump >/dev/null; then
  for n in serial openmp mpi shm hybrid; do
    [ -x "$TMP/bin-$n" ] || continue
    check "$n: its -O3 build keeps the next batch's prefetch (prefetcht* in objdump)" "" \
      bash -c 'objdump -d "$1" | grep -q prefetcht' _ "$TMP/bin-$n"
  done
else skip "the prefetch survives the optimiser" "not x86-64 or objdump missing (apt-get install binutils)"; fi
finish
