#!/usr/bin/env bash
# tests/test_target.sh — --target-accuracy (time-to-accuracy) and the learning-rate
# schedule (--lr-scaling linear, --lr-base-batch, --warmup-epochs; common/schedule.h).
#
# - serial: a reachable target stops at the first epoch whose test accuracy is >= A, with
#   epochs_to_target = epochs, seconds_to_target = total_seconds and the loss curve a
#   prefix of the run without a target; an unreachable one runs every epoch and fills
#   nothing; the summary line says which.
# - bad values (0, 101, nan, -1, abc, a bad mode, a warm-up without linear scaling): exit
#   2, one line, no row.
# - the schedule against its closed form, end to end: linear scaling at batch = B0 with
#   a warm-up is the default's bits (the ramp goes from LR to LR); at batch 2·B0 it is
#   the bits of --lr 2·LR (the scaled rate, no warm-up).
# - equal maths under a warm-up: serial, openmp --accum loop (T = 2: the weights
#   bit-identical, the loss within 1e-12, as tests/test_openmp.sh) and mpi allreduce
#   P = 2 (loss within 1e-5, as tests/test_mpi.sh).
# - --checkpoint/--resume: a run resumed from a checkpoint that reached the target at its
#   last epoch ends at once with that row; one that reached it earlier is refused.
# - every other trainer that builds here accepts the flags and stops at the target
#   (MPI ranks together: the job ends, no hang).
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
LIMIT=$((120 * SLOWDOWN))
DATA=data/mnist
BASE=(--data $DATA --train 1200 --test 300 --batch 60 --lr 0.05 --quiet)
[ -x serial/serial ] || { fail "serial/serial built" "missing (make all)"; finish; }

# ---- serial: stop at the target, the row's columns, the curve prefix
serial/serial "${BASE[@]}" --epochs 6 --csv "$TMP/full.csv" >"$TMP/full.out" 2>&1
full_loss=$(csv_col "$TMP/full.csv" train_loss_curve)
full_acc=$(csv_col "$TMP/full.csv" test_acc_curve)
check "serial without a target: a row, the target columns empty" "$(cat "$TMP/full.out")" \
  [ -n "$full_loss" -a -z "$(csv_col "$TMP/full.csv" epochs_to_target)$(csv_col "$TMP/full.csv" target_accuracy)" ]
# the target: just below epoch 4's accuracy (the CSV rounds it to 4 decimals); expected
# stop: the first epoch whose accuracy reaches it
target=$(echo "$full_acc" | LC_ALL=C awk -F';' '{ printf "%.4f\n", $4 - 0.001 }')
want=$(echo "$full_acc" | LC_ALL=C awk -F';' -v t="$target" '{ for (i = 1; i <= NF; i++) if ($i + 0 >= t + 0) { print i; exit } }')
serial/serial "${BASE[@]}" --epochs 6 --target-accuracy "$target" --csv "$TMP/t.csv" >"$TMP/t.out" 2>&1
rc=$?
e=$(csv_col "$TMP/t.csv" epochs) to=$(csv_col "$TMP/t.csv" epochs_to_target)
st=$(csv_col "$TMP/t.csv" seconds_to_target) tot=$(csv_col "$TMP/t.csv" total_seconds)
loss=$(csv_col "$TMP/t.csv" train_loss_curve)
prefix=$(echo "$full_loss" | cut -d';' -f1-"${want:-1}")
check "target $target% (just below epoch 4's accuracy): stops at epoch $want, the first to reach it" \
  "exit $rc, epochs '$e', epochs_to_target '$to' (want $want)" [ $rc = 0 -a "$e" = "$want" -a "$to" = "$want" ]
check "seconds_to_target = total_seconds, filled" "seconds_to_target '$st', total_seconds '$tot'" [ -n "$st" -a "$st" = "$tot" ]
check "the loss curve is the prefix of the run without a target (bit-identical)" "$loss vs $prefix" [ "$loss" = "$prefix" ]
tg=$(LC_ALL=C awk -v t="$target" 'BEGIN { printf "%g", t }')   # as the summary line prints it
check "the summary line says 'target $tg% at epoch $want'" "$(tail -n 1 "$TMP/t.out")" \
  grep -q "| target $tg% at epoch $want (" "$TMP/t.out"

serial/serial "${BASE[@]}" --epochs 3 --target-accuracy 99.99 --csv "$TMP/u.csv" >"$TMP/u.out" 2>&1
check "an unreachable target runs every epoch and leaves epochs_to_target, seconds_to_target empty" "$(tail -n 1 "$TMP/u.out")" \
  [ "$(csv_col "$TMP/u.csv" epochs)" = 3 -a -z "$(csv_col "$TMP/u.csv" epochs_to_target)$(csv_col "$TMP/u.csv" seconds_to_target)" \
  -a "$(csv_col "$TMP/u.csv" target_accuracy)" = 99.99 ]
check "... and the summary line says 'not reached in 3 epochs'" "$(tail -n 1 "$TMP/u.out")" \
  grep -q "| target 99.99% not reached in 3 epochs" "$TMP/u.out"

# ---- bad values: exit 2, one line, no row
for v in 0 101 nan -1 abc ""; do
  expect_error "--target-accuracy '$v' is refused" "target-accuracy" serial/serial "${BASE[@]}" --target-accuracy "$v"
done
expect_error "--lr-scaling cubic is refused" "lr-scaling" serial/serial "${BASE[@]}" --lr-scaling cubic
expect_error "--lr-base-batch 0 is refused" "lr-base-batch" serial/serial "${BASE[@]}" --lr-scaling linear --lr-base-batch 0
expect_error "--warmup-epochs -1 is refused" "warmup-epochs" serial/serial "${BASE[@]}" --lr-scaling linear --warmup-epochs -1
expect_error "--warmup-epochs without --lr-scaling linear is refused" "needs --lr-scaling linear" \
  serial/serial "${BASE[@]}" --warmup-epochs 2

# ---- the schedule against its closed form, end to end
S2=(--data $DATA --train 1200 --test 300 --epochs 2 --quiet)
serial/serial "${S2[@]}" --batch 64 --lr 0.05 --csv "$TMP/s.csv" >/dev/null 2>&1
serial/serial "${S2[@]}" --batch 64 --lr 0.05 --lr-scaling linear --lr-base-batch 64 --warmup-epochs 1 --csv "$TMP/s.csv" >/dev/null 2>&1
serial/serial "${S2[@]}" --batch 128 --lr 0.1 --csv "$TMP/s.csv" >/dev/null 2>&1
serial/serial "${S2[@]}" --batch 128 --lr 0.05 --lr-scaling linear --lr-base-batch 64 --csv "$TMP/s.csv" >/dev/null 2>&1
serial/serial "${S2[@]}" --batch 128 --lr 0.05 --lr-scaling linear --lr-base-batch 64 --warmup-epochs 1 --csv "$TMP/s.csv" >/dev/null 2>&1
c=(); for r in 1 2 3 4 5; do c[$r]=$(csv_col "$TMP/s.csv" train_loss_curve $r); done
check "linear at batch = B0 with a warm-up: the default's bits (lr_schedule linear-b64-w1)" "${c[1]} vs ${c[2]}" \
  [ -n "${c[1]}" -a "${c[1]}" = "${c[2]}" -a "$(csv_col "$TMP/s.csv" lr_schedule 2)" = linear-b64-w1 ]
check "linear at batch 2 x B0: the bits of --lr 2 x LR" "${c[3]} vs ${c[4]}" [ -n "${c[3]}" -a "${c[3]}" = "${c[4]}" ]
check "a warm-up changes the first epochs (it ramps from LR)" "${c[4]} vs ${c[5]}" [ -n "${c[5]}" -a "${c[4]}" != "${c[5]}" ]

# ---- equal maths under a warm-up: serial, openmp --accum loop, mpi allreduce P = 2
EQ=(--data $DATA --train 1202 --test 300 --batch 60 --lr 0.05 --lr-scaling linear --lr-base-batch 30 --warmup-epochs 1 --epochs 3 --quiet)
serial/serial "${EQ[@]}" --csv "$TMP/eq-serial.csv" >/dev/null 2>&1
ref=$(csv_col "$TMP/eq-serial.csv" train_loss_curve)
# rel_dev A B: the largest relative difference of two ';'-separated curves ("bad" if their lengths differ)
rel_dev() {
  LC_ALL=C awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, ";"); m = split(b, y, ";");
    if (n != m || n == 0) { print "bad"; exit } d = 0;
    for (i = 1; i <= n; i++) { e = (x[i] - y[i]) / x[i]; if (e < 0) e = -e; if (!(e <= d)) d = e } printf "%.3g\n", d }'
}
within() { LC_ALL=C awk -v d="$1" -v t="$2" 'BEGIN { exit !(d != "bad" && d + 0 <= t + 0) }'; }
if [ -x openmp/openmp ]; then
  OMP_WAIT_POLICY=passive timeout $LIMIT openmp/openmp "${EQ[@]}" --accum loop --threads 2 --csv "$TMP/eq-omp.csv" >/dev/null 2>&1
  d=$(rel_dev "$ref" "$(csv_col "$TMP/eq-omp.csv" train_loss_curve)")
  same_acc=$([ "$(csv_col "$TMP/eq-omp.csv" test_acc_curve)" = "$(csv_col "$TMP/eq-serial.csv" test_acc_curve)" ] && echo yes)
  check "warm-up: openmp --accum loop T = 2 = serial (loss within 1e-12: $d, test accuracy equal: ${same_acc:-no})" \
    "serial $ref, openmp $(csv_col "$TMP/eq-omp.csv" train_loss_curve)" \
    [ "$(within "$d" 1e-12 && echo yes)" = yes -a "$same_acc" = yes ]
else skip "warm-up: openmp = serial" "openmp/openmp not built (no OpenMP)"; fi
if [ -x mpi/mpi ] && command -v mpirun >/dev/null; then
  timeout $LIMIT scripts/mpirun.sh 2 mpi/mpi "${EQ[@]}" --csv "$TMP/eq-mpi.csv" >"$TMP/eq-mpi.out" 2>&1
  d=$(rel_dev "$ref" "$(csv_col "$TMP/eq-mpi.csv" train_loss_curve)")
  check "warm-up: mpi allreduce P = 2 = serial (loss within 1e-5: $d)" "$(tail -n 3 "$TMP/eq-mpi.out")" within "$d" 1e-5
else skip "warm-up: mpi = serial" "mpi/mpi or mpirun missing"; fi

# ---- checkpoints: resumed after the target
serial/serial "${BASE[@]}" --epochs 6 --target-accuracy "$target" --checkpoint "$TMP/ck" --checkpoint-every 100 \
  --csv "$TMP/ck.csv" >/dev/null 2>&1
serial/serial "${BASE[@]}" --epochs 10 --target-accuracy "$target" --resume "$TMP/ck" --csv "$TMP/ck.csv" >"$TMP/ck.out" 2>&1
rc=$?
check "resumed from the checkpoint of a run stopped at the target: ends at once with its row (epoch $want)" \
  "exit $rc, epochs '$(csv_col "$TMP/ck.csv" epochs)', to_target '$(csv_col "$TMP/ck.csv" epochs_to_target)': $(tail -n 2 "$TMP/ck.out")" \
  [ $rc = 0 -a "$(csv_col "$TMP/ck.csv" epochs)" = "$want" -a "$(csv_col "$TMP/ck.csv" epochs_to_target)" = "$want" \
  -a "$(csv_col "$TMP/ck.csv" train_loss_curve)" = "$prefix" ]
first=$(echo "$full_acc" | cut -d';' -f1)
if [ "$want" -gt 1 ]; then
  expect_error "resumed with a target reached before the checkpoint's last epoch: refused" "reached --target-accuracy" \
    serial/serial "${BASE[@]}" --epochs 10 --target-accuracy "$first" --resume "$TMP/ck"
fi

# ---- every other trainer accepts the flags and stops at a target it reaches (1%)
FL=(--data $DATA --train 600 --test 200 --batch 60 --epochs 3 --quiet --lr-scaling linear --warmup-epochs 1 --target-accuracy 1)
SIZE=()   # more flags after FL: the CUDA emulation is slow, its runs are tiny
run_one() {   # NAME COMMAND...: exit 0, stopped at epoch 1, the columns filled
  local name=$1; shift
  rm -f "$TMP/one.csv"
  OMP_WAIT_POLICY=passive timeout $LIMIT "$@" "${FL[@]}" "${SIZE[@]}" --csv "$TMP/one.csv" >"$TMP/one.out" 2>&1
  local rc=$?
  check "$name: the flags accepted, stopped at epoch 1 (target 1%)" "exit $rc: $(tail -n 3 "$TMP/one.out")" \
    [ $rc = 0 -a "$(csv_col "$TMP/one.csv" epochs_to_target)" = 1 -a "$(csv_col "$TMP/one.csv" epochs)" = 1 \
    -a "$(csv_col "$TMP/one.csv" lr_schedule)" = linear-b64-w1 ]
}
[ -x openmp/openmp ] && run_one "openmp --accum model" openmp/openmp --threads 2 --accum model
if command -v mpirun >/dev/null; then
  [ -x mpi/mpi ] && run_one "mpi allreduce P = 2" scripts/mpirun.sh 2 mpi/mpi
  mpi/mpi --list-variants 2>/dev/null | grep -q '^shm' && run_one "mpi --sync shm P = 2" scripts/mpirun.sh 2 mpi/mpi --sync shm
  [ -x mpi/shm ] && run_one "mpi/shm P = 2" scripts/mpirun.sh 2 mpi/shm
  [ -x mpi/pipeline ] && run_one "pipeline P = 2" scripts/mpirun.sh 2 mpi/pipeline
  [ -x hybrid/hybrid ] && run_one "hybrid 2 x 1" scripts/mpirun.sh --bind-to-none 2 hybrid/hybrid --threads 1
  [ -x cnn/cnn ] && run_one "cnn 2 x 1" scripts/mpirun.sh --bind-to-none 2 cnn/cnn --threads 1
  SIZE=(--train 100 --test 50 --image-size 14 --hidden 16 --batch 50)
  [ -x cuda/cuda-mpi-emu ] && run_one "cuda-mpi-emu P = 2" scripts/mpirun.sh 2 cuda/cuda-mpi-emu
else skip "MPI trainers accept the flags" "mpirun not found"; fi
if [ -x cuda/cuda-emu ]; then
  SIZE=(--train 100 --test 50 --image-size 14 --hidden 16 --batch 50)
  run_one "cuda-emu" cuda/cuda-emu
  expect_error "cuda-emu --graph with a warm-up is refused" "graph" cuda/cuda-emu "${FL[@]}" --graph
else skip "cuda-emu accepts the flags" "cuda/cuda-emu not built (no C++ compiler)"; fi
finish
