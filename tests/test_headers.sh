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
  echo "#include \"$(basename "$h")\"" | $compiler -std=c11 -fsyntax-only -fopenmp -march=native -Icommon -x c - \
    >"$TMP/h.err" 2>&1
  check "$h compiles alone ($compiler)" "$(head -n 3 "$TMP/h.err")" [ ! -s "$TMP/h.err" ]
done

for f in serial/serial.c openmp/openmp.c mpi/mpi.c mpi/shm.c mpi/pipeline.c hybrid/hybrid.c cnn/cnn.c; do
  line=$(sed -n 's/^ \* Compile: make [a-z]*  *(\(.*\))$/\1/p' "$f")
  if [ -z "$line" ]; then fail "$f: Compile: line" "no ' * Compile: make T   (command)' line"; continue; fi
  [[ $line == mpicc* ]] && [ $have_mpicc = 0 ] && { skip "$f: Compile: line builds" "$MPICC not found"; continue; }
  rm -f "$TMP/prog"
  bash -c "$line -o \"\$1\"" compile "$TMP/prog" >"$TMP/c.err" 2>&1
  check "$f: its Compile: line builds it ($line)" "$(head -n 3 "$TMP/c.err")" [ -x "$TMP/prog" ]
done
finish
