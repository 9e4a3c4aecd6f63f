#!/usr/bin/env bash
# tests/test_golden.sh — the numbers of every trainer x variant, pinned.
#
# Each configuration below trains on 2,000 MNIST digits (data/mnist) for 3 epochs and
# its CSV row's final loss, loss curve (%.17g) and test-accuracy curve are hashed; the
# hash must equal the one in tests/golden.txt. The loss of epoch e is computed with the
# parameters of epoch e-1, so any change of a parameter's bits shows in the curve. Only
# variants documented as deterministic are pinned (serial --gemm blas is not: OpenBLAS
# picks its kernels by CPU). A refactoring that changes no maths keeps every hash; a
# change that means to alter the numbers regenerates the file, in its own commit:
#   tests/test_golden.sh --update
# Options: --only REGEX (configurations whose name matches). PARTRAIN_GOLDEN_BIN_DIR=DIR
# runs the binaries from DIR instead (DIR/serial/serial, ...: the portable build).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh

update=0 only=.
while [ $# -gt 0 ]; do
  case $1 in
    --update) update=1; shift ;;
    --only) only=$2; shift 2 ;;
    *) echo "test_golden: unknown option '$1' (--update, --only REGEX)" >&2; exit 2 ;;
  esac
done
GOLDEN=tests/golden.txt
BIN=${PARTRAIN_GOLDEN_BIN_DIR:-.}
MPI="scripts/mpirun.sh --bind-to-none"
BASE=(--data data/mnist --train 2000 --test 500 --epochs 3 --quiet)
# an awkward net: widths that are no multiple of the 64-column tile, leaky ReLU, and
# --batch full, so the update's K (2,000 rows) runs in several K blocks
ODD=(--data data/mnist --train 2000 --test 500 --epochs 3 --quiet --hidden 100,37 --activation leaky-relu --batch full --lr 0.5)
SIG=(--data data/mnist --train 2000 --test 500 --epochs 3 --quiet --hidden 70 --activation sigmoid --batch 100 --lr 0.1)

# name | launcher (- for none) | program | flags. The variants come from the programs'
# --list-variants (NAME<TAB>FLAGS), so a new variant is pinned or fails here ("no hash").
# serial's --gemm blas is left out: OpenBLAS picks its kernels, and so its sums, by CPU.
vlist() { [ -x "$BIN/$1" ] && "$BIN/$1" --list-variants </dev/null | cut -f1,2 | tr '\t' '|'; }
configs() {
  cat <<EOF
serial|-|serial/serial|${BASE[*]}
serial-odd|-|serial/serial|${ODD[*]}
serial-sigmoid|-|serial/serial|${SIG[*]}
EOF
  for t in 1 2; do
    while IFS='|' read -r v vf; do
      echo "openmp-$v-t$t|-|openmp/openmp|${BASE[*]} --threads $t $vf"
    done < <(vlist openmp/openmp)
    echo "openmp-loop-odd-t$t|-|openmp/openmp|${ODD[*]} --threads $t --accum loop"
    echo "openmp-owner-odd-t$t|-|openmp/openmp|${ODD[*]} --threads $t --accum owner"
    echo "openmp-reduction-sigmoid-t$t|-|openmp/openmp|${SIG[*]} --threads $t --accum reduction"
  done
  for p in 1 2; do
    while IFS='|' read -r v vf; do
      echo "mpi-$v-p$p|$MPI $p|mpi/mpi|${BASE[*]} $vf"
    done < <(vlist mpi/mpi)
    echo "mpi-allreduce-odd-p$p|$MPI $p|mpi/mpi|${ODD[*]} --sync allreduce"
    while IFS='|' read -r v vf; do   # mpi/shm's rows: program mpi, variant shm
      echo "mpi-$v-p$p|$MPI $p|mpi/shm|${BASE[*]} $vf"
    done < <(vlist mpi/shm)
    echo "mpi-shm-odd-p$p|$MPI $p|mpi/shm|${ODD[*]}"
    while IFS='|' read -r v vf; do
      echo "pipeline-${v#gpipe-}-p$p|$MPI $p|mpi/pipeline|${BASE[*]} $vf"
    done < <(vlist mpi/pipeline)
  done
  for pt in 1x1 1x2 2x1; do
    p=${pt%x*} t=${pt#*x}
    while IFS='|' read -r v vf; do
      echo "hybrid-$v-$pt|$MPI $p|hybrid/hybrid|${BASE[*]} --threads $t $vf"
    done < <(vlist hybrid/hybrid)
    echo "hybrid-allreduce-odd-$pt|$MPI $p|hybrid/hybrid|${ODD[*]} --threads $t --sync allreduce"
    while IFS='|' read -r v vf; do
      echo "cnn-$v-$pt|$MPI $p|cnn/cnn|--data data/mnist --train 2000 --test 500 --epochs 3 --quiet --threads $t $vf"
    done < <(vlist cnn/cnn)
  done
  while IFS='|' read -r v vf; do
    echo "cuda-emu-$v|-|cuda/cuda-emu|--data data/mnist --train 300 --test 100 --image-size 14 --hidden 40,24 --batch 50 --epochs 2 --quiet $vf"
  done < <(vlist cuda/cuda-emu)
}

[ -d data/mnist ] || { skip "golden" "data/mnist missing (make data)"; exit 0; }
new=$(mktemp)
while IFS='|' read -r name launcher prog flags; do
  [[ $name =~ $only ]] || continue
  if [ ! -x "$BIN/$prog" ]; then skip "golden $name" "$BIN/$prog not built"; continue; fi
  if [ "$launcher" != - ] && ! command -v mpirun >/dev/null; then skip "golden $name" "mpirun not found"; continue; fi
  csv=$TMP/$name.csv
  read -r -a argv <<<"$flags"
  read -r -a launch <<<"${launcher#-}"
  if ! OMP_WAIT_POLICY=passive "${launch[@]}" "$BIN/$prog" "${argv[@]}" --csv "$csv" </dev/null >"$TMP/$name.out" 2>&1; then
    fail "golden $name" "the run failed: $(tail -n 3 "$TMP/$name.out" | tr '\n' ' ')"
    continue
  fi
  sig="$(csv_col "$csv" final_train_loss) $(csv_col "$csv" train_loss_curve) $(csv_col "$csv" test_acc_curve)"
  hash=$(printf '%s' "$sig" | sha256sum | cut -c1-16)
  echo "$name $hash" >>"$new"
  if [ $update = 1 ]; then pass "golden $name (recorded $hash)"; continue; fi
  want=$(awk -v n="$name" '$1 == n { print $2 }' "$GOLDEN" 2>/dev/null)
  if [ -z "$want" ]; then fail "golden $name" "no hash in $GOLDEN (tests/test_golden.sh --update)"
  elif [ "$want" = "$hash" ]; then pass "golden $name"
  else fail "golden $name" "hash $hash, expected $want (final loss and curve: $sig)"
  fi
done < <(configs)

if [ $update = 1 ]; then
  { echo "# tests/golden.txt — written by tests/test_golden.sh --update; name, hash of the loss curve"
    { grep -v '^#' "$GOLDEN" 2>/dev/null | awk 'NR == FNR { seen[$1] = 1; next } !($1 in seen)' "$new" -; cat "$new"; } | sort; } >"$GOLDEN.new"
  mv "$GOLDEN.new" "$GOLDEN"
  echo "test_golden: wrote $(grep -vc '^#' "$GOLDEN") hashes to $GOLDEN"
fi
rm -f "$new"
finish
