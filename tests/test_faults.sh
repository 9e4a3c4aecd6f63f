#!/usr/bin/env bash
# tests/test_faults.sh — bad inputs and faults, by kind (issue 19), against every trainer
# that is built. The promise for each: one line on stderr naming the problem, exit
# status 2, nothing written (no CSV row, no file created), and the check made before the
# work. Kinds covered here:
#   1. inconsistent data: a test set whose images have another size than the training
#      set's; ranks that load different training sets (mpirun's MPMD form gives rank 1
#      another --data);
#   2. memory: what a run will allocate is estimated first and refused with the figures;
#   3. outputs found bad before the work: a directory, a foreign CSV header, an immutable
#      file, a missing parent directory, a FIFO, /dev/full, an empty name, a bad
#      --dump-params path; a torn last CSV line is repaired; a trainer piped into head
#      still writes its row;
#   4. messages: a flag's name (not its value) in the message, values out of range
#      called that, the largest seed accepted, a long --data path keeps the reason;
#   5. file safety (issue 30): --checkpoint never overwrites a file that is not a
#      checkpoint, nor the --csv file through ./, .., a symbolic or a hard link; a link
#      where the old FILE.tmp was is never followed; two runs sharing --checkpoint;
#   6. limits: ulimit -f on the CSV (nothing torn, the row on stderr) and the checkpoint
#      (a warning, no temporary file left, "no checkpoint was written"); ulimit -v (the
#      estimate, exit 2); OMP_NUM_THREADS=1000 refused like --threads 1000;
#   7. data identity: --resume with changed data refused; a finished checkpoint resumed
#      twice adds no row;
#   8. locales: every bench/ and scripts/ shell script that uses awk, printf or sort sets
#      LC_ALL=C; bench/openmp-bench.sh's CSV under de_DE.UTF-8 has the columns it has
#      under C;
#   9. script inputs: summarize.py on non-UTF-8 bytes, a stray '"', a short row;
#      report.py with train_n=inf; checkpoint.py with a non-UTF-8 data name: one line
#      naming the file and line, exit 2 (report.py still writes the report), no traceback;
#  10. a build for another CPU: an instruction set the build uses and this CPU lacks is
#      named in one line before main (common/isa_check.c), exit 1, instead of SIGILL.
set -u
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
LIMIT=$((60 * SLOWDOWN))
DATA=data/mnist
MPI="scripts/mpirun.sh"
[ -d $DATA ] || { skip "faults" "data/mnist missing (make data)"; exit 0; }
have_mpi=0; command -v mpirun >/dev/null && have_mpi=1

# ---- small IDX data sets written here: 28x28 training images, 56x56 test images
mkdir -p "$TMP/mixed" "$TMP/other"
python3 - "$TMP/mixed" "$TMP/other" <<'EOF' || { fail "faults: writing IDX files" "python3 failed"; finish; }
import struct, sys, random
def write(path, n, side, seed):
    r = random.Random(seed)
    with open(path + "-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, side, side))
        f.write(bytes(r.randrange(256) for _ in range(n * side * side)))
    with open(path + "-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, n))
        f.write(bytes(r.randrange(10) for _ in range(n)))
mixed, other = sys.argv[1], sys.argv[2]
write(mixed + "/train", 200, 28, 1); write(mixed + "/t10k", 50, 56, 2)
write(other + "/train", 200, 28, 3); write(other + "/t10k", 50, 28, 4)
EOF

# run_each NAME KEY ARGS...: expect_error for every trainer (MPI ones through mpirun)
run_each() {
  local name=$1 key=$2; shift 2
  [ -x serial/serial ] && expect_error "serial: $name" "$key" serial/serial "$@"
  [ -x openmp/openmp ] && expect_error "openmp: $name" "$key" openmp/openmp --threads 2 "$@"
  [ -x cuda/cuda-emu ] && expect_error "cuda-emu: $name" "$key" cuda/cuda-emu "$@"
  if [ $have_mpi = 1 ]; then
    [ -x mpi/mpi ] && expect_error "mpi P=2: $name" "$key" --label mpi $MPI 2 mpi/mpi "$@"
    [ -x mpi/pipeline ] && expect_error "pipeline P=2: $name" "$key" --label pipeline $MPI 2 mpi/pipeline "$@"
    [ -x hybrid/hybrid ] && expect_error "hybrid 2x1: $name" "$key" --label hybrid $MPI --bind-to-none 2 hybrid/hybrid "$@"
    [ -x cnn/cnn ] && expect_error "cnn 2x1: $name" "$key" --label cnn $MPI --bind-to-none 2 cnn/cnn "$@"
  fi
}

# ---- 1. inconsistent data
run_each "test images 56x56, training images 28x28: both sets named" "t10k-images holds 56x56 .*train-images 28x28" \
  --data "$TMP/mixed" --epochs 1
if [ $have_mpi = 1 ] && [ -x mpi/mpi ]; then
  for prog in mpi/mpi hybrid/hybrid cnn/cnn; do
    [ -x $prog ] || continue
    label=${prog#*/}
    expect_error "$label: rank 1 loads another training set (same size, other pixels)" "different training sets" \
      --label "$label" $MPI 1 $prog --data "$TMP/other" --test 10 --image-size 28 --epochs 1 --csv "$TMP/err.csv" : \
      -np 1 $prog --data "$TMP/mixed" --test 10 --image-size 28 --epochs 1 --csv "$TMP/err.csv"
    expect_error "$label: rank 1 loads fewer training samples" "different training sets\|different flags" \
      --label "$label" $MPI 1 $prog --data "$TMP/other" --epochs 1 --csv "$TMP/err.csv" : -np 1 $prog --data "$TMP/other" \
      --train 150 --epochs 1 --csv "$TMP/err.csv"
  done
fi

# ranks given other command lines (mpirun's MPMD form): refused at once, never a hang
if [ $have_mpi = 1 ]; then
  for prog in mpi/mpi mpi/pipeline; do
    [ -x $prog ] || continue
    label=${prog#*/}
    expect_error "$label: ranks given different flags (--epochs 2 : --epochs 3)" "different flags" \
      --label "$label" $MPI 1 $prog --data $DATA --train 500 --epochs 2 --csv "$TMP/err.csv" : \
      -np 1 $prog --data $DATA --train 500 --epochs 3 --csv "$TMP/err.csv"
    expect_error "$label: only rank 1 refuses its flags (--epochs 0): named, no hang" "rank 1: --epochs: 0 is out of range" \
      --label "$label" $MPI 1 $prog --data $DATA --train 500 --epochs 2 --csv "$TMP/err.csv" : \
      -np 1 $prog --data $DATA --train 500 --epochs 0 --csv "$TMP/err.csv"
  done
fi

# ---- 2. memory, estimated before allocating (PARTRAIN_MEM_AVAILABLE fakes the figure;
# the real one is the smaller of MemAvailable and the cgroup's room)
export PARTRAIN_MEM_AVAILABLE=10M
key="not enough memory: .*need.* MiB.* 10.0 MiB available"
expect_error "serial: data and model over 10 MiB refused with both figures" "$key" serial/serial --data $DATA
[ -x openmp/openmp ] && expect_error "openmp: data and model over 10 MiB refused" "$key" openmp/openmp --data $DATA --threads 2
[ -x cuda/cuda-emu ] && expect_error "cuda-emu: data and host buffers over 10 MiB refused" "$key" cuda/cuda-emu --data $DATA
if [ $have_mpi = 1 ]; then
  for prog in mpi/mpi mpi/pipeline hybrid/hybrid cnn/cnn; do
    [ -x $prog ] && expect_error "${prog#*/} P=2: the node's ranks together over 10 MiB refused" \
      "not enough memory: 2 processes on this node need" --label "${prog#*/}" $MPI --bind-to-none 2 $prog --data $DATA
  done
fi
unset PARTRAIN_MEM_AVAILABLE
# openmp counts what each --accum mode allocates per thread (model and loop: the whole
# batch per work, and a second input buffer): the figure its refusal gives is at least
# the peak resident memory of the same run (8 threads, batch 2048)
if [ -x openmp/openmp ] && [ -x /usr/bin/python3 ]; then
  for v in $(variants openmp/openmp); do
    RUN=(openmp/openmp --data $DATA --threads 8 --batch 2048 $(variant_flags openmp/openmp $v) --epochs 1 --csv none --quiet)
    need=$(PARTRAIN_MEM_AVAILABLE=1K "${RUN[@]}" 2>&1 | sed -n 's/.*needs \([0-9.]*\) MiB.*/\1/p')
    peak=$(OMP_WAIT_POLICY=passive /usr/bin/python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print(round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1))' "${RUN[@]}" 2>/dev/null)
    check "openmp $v, 8 threads, batch 2048: the memory check counts at least the run's peak (${need:-?} >= ${peak:-?} MiB)" \
      "needs '$need' MiB, peak resident '$peak' MiB" awk -v n="$need" -v p="$peak" 'BEGIN { exit !(n != "" && p != "" && n + 0 >= p + 0) }'
  done
else
  skip "openmp's memory check against its peak" "openmp/openmp not built or /usr/bin/python3 missing"
fi
avail_kb=$(awk '/MemAvailable/ { print $2 }' /proc/meminfo)
if [ "${avail_kb:-0}" -lt 130000000 ]; then
  expect_error "serial: --hidden 65536 x 8 layers (130 GiB) refused, not OOM-killed" "not enough memory: needs 130" \
    serial/serial --data $DATA --hidden 65536,65536,65536,65536,65536,65536,65536,65536
else
  skip "serial: --hidden 65536 x 8 layers refused" "this machine has over 130 GB available"
fi

# ---- 3. outputs, checked before the work
mkdir -p "$TMP/adir"
printf 'a,b,c\n1,2,3\n' >"$TMP/foreign.csv"
cp "$TMP/foreign.csv" "$TMP/foreign.before"
expect_error "serial: --csv a directory" "is a directory" serial/serial --data $DATA --csv "$TMP/adir"
expect_error "serial: --csv with a foreign header (the file is left alone)" "header" serial/serial --data $DATA --csv "$TMP/foreign.csv"
check "serial: the foreign CSV is unchanged" "it changed" cmp -s "$TMP/foreign.csv" "$TMP/foreign.before"
expect_error "serial: --csv in a missing directory two levels down" "does not exist" serial/serial --data $DATA --csv "$TMP/no/such/x.csv"
expect_error "serial: --csv /dev/full (not a regular file)" "not a regular file" serial/serial --data $DATA --csv /dev/full
mkfifo "$TMP/fifo"
expect_error "serial: --csv a FIFO (refused, not blocked on)" "not a regular file" serial/serial --data $DATA --csv "$TMP/fifo"
expect_error "serial: --csv \"\"" "empty file name" serial/serial --data $DATA --csv ""
touch "$TMP/immutable.csv"
if chattr +i "$TMP/immutable.csv" 2>/dev/null; then
  expect_error "serial: --csv an immutable file" "cannot be written" serial/serial --data $DATA --csv "$TMP/immutable.csv"
  chattr -i "$TMP/immutable.csv"
else
  skip "serial: --csv an immutable file" "chattr +i is not possible here (needs root and a file system with attributes)"
fi
for prog in mpi/mpi hybrid/hybrid; do
  [ $have_mpi = 1 ] && [ -x $prog ] || continue
  label=${prog#*/}
  expect_error "$label: --dump-params into a missing directory, before the work" "--dump-params" --label "$label" \
    $MPI --bind-to-none 2 $prog --data $DATA --epochs 1 --dump-params "$TMP/no/such/params"
  expect_error "$label: --csv a directory, before the work" "is a directory" --label "$label" \
    $MPI --bind-to-none 2 $prog --data $DATA --epochs 1 --csv "$TMP/adir"
done
for prog in openmp/openmp cuda/cuda-emu; do
  [ -x $prog ] && expect_error "${prog#*/}: --csv with a foreign header" "header" $prog --data $DATA --csv "$TMP/foreign.csv"
done

# a torn last line: the next row starts on a new line, with a note
TINY=(--data $DATA --train 200 --test 50 --epochs 1 --quiet)
serial/serial "${TINY[@]}" --csv "$TMP/torn.csv" >/dev/null 2>&1
printf 'fragment-of-a-row,1,2' >>"$TMP/torn.csv"
serial/serial "${TINY[@]}" --csv "$TMP/torn.csv" >/dev/null 2>"$TMP/torn.err"; rc=$?
check "a torn last CSV line: exit 0, a note, the new row on its own line" \
  "exit $rc, $(head -c 200 "$TMP/torn.err"); last lines: $(tail -n 2 "$TMP/torn.csv" | cut -c1-60 | tr '\n' '|')" \
  eval '[ $rc -eq 0 ] && grep -q "torn" "$TMP/torn.err" && [ "$(tail -n 1 "$TMP/torn.csv" | cut -d, -f2)" = serial ] &&
        [ "$(tail -n 2 "$TMP/torn.csv" | head -n 1)" = "fragment-of-a-row,1,2" ]'

# piped into head: stdout closes early, the row is still written
rm -f "$TMP/pipe.csv"
serial/serial --data $DATA --train 500 --test 50 --epochs 3 --csv "$TMP/pipe.csv" 2>/dev/null | head -n 1 >/dev/null
check "serial piped into head -n 1: the run goes on and writes its row" "$(csv_rows "$TMP/pipe.csv") rows" \
  [ "$(csv_rows "$TMP/pipe.csv")" = 1 ]

# ---- 4. messages that name the problem
if [ $have_mpi = 1 ]; then
  [ -x mpi/mpi ] && expect_error "mpi: --batch-per-rank 0 names the flag" "^mpi: --batch-per-rank: 0 is out of range" \
    --label mpi $MPI 2 mpi/mpi --data $DATA --batch-per-rank 0
  [ -x mpi/pipeline ] && expect_error "pipeline: --microbatches 0 names the flag" "^pipeline: --microbatches: 0 is out of range" \
    --label pipeline $MPI 2 mpi/pipeline --data $DATA --microbatches 0
fi
expect_error "--lr 1e-320 (a denormal) is out of range, not 'not a number'" "--lr: 1e-320 is out of range" \
  serial/serial --data $DATA --lr 1e-320
expect_error "--epochs 99999999999999999999 is out of range, not 'not an integer'" "--epochs: .* is out of range" \
  serial/serial --data $DATA --epochs 99999999999999999999
expect_error "--seed -1 rejected" "--seed" serial/serial --data $DATA --seed -1
expect_error "--seed 18446744073709551616 (2^64) is out of range" "--seed: .* out of range" \
  serial/serial --data $DATA --seed 18446744073709551616
serial/serial "${TINY[@]}" --seed 18446744073709551615 --csv "$TMP/seed.csv" >/dev/null 2>"$TMP/seed.err"; rc=$?
check "--seed 18446744073709551615 (2^64 - 1) is accepted and recorded" "exit $rc: $(head -c 200 "$TMP/seed.err")" \
  eval '[ $rc -eq 0 ] && [ "$(csv_col "$TMP/seed.csv" seed)" = 18446744073709551615 ]'
long=$TMP/$(printf 'd%.0s' $(seq 1 200))/$(printf 'e%.0s' $(seq 1 200))/$(printf 'f%.0s' $(seq 1 200))/$(printf 'g%.0s' $(seq 1 200))/$(printf 'h%.0s' $(seq 1 200))
mkdir -p "$long"
expect_error "a 1,000-character --data path: the message keeps the reason" "not found" serial/serial --data "$long"
# ---- 5. file safety of --checkpoint
S5=(serial/serial --data $DATA --train 300 --test 50 --epochs 2 --quiet)
mkdir -p "$TMP/fs/res"
"${S5[@]}" --csv "$TMP/fs/res/runs.csv" >/dev/null 2>&1
ln -s runs.csv "$TMP/fs/res/sym"; ln "$TMP/fs/res/runs.csv" "$TMP/fs/res/hard"
before=$(sha256sum <"$TMP/fs/res/runs.csv")
for alias in "$TMP/fs/res/./runs.csv" "$TMP/fs/res/../res/runs.csv" "$TMP/fs/res/sym" "$TMP/fs/res/hard"; do
  expect_error "--checkpoint ${alias#$TMP/fs/} names the --csv file: refused" "the same file as --csv" \
    "${S5[@]}" --csv "$TMP/fs/res/runs.csv" --checkpoint "$alias"
done
expect_error "--checkpoint ./x.csv with --csv x.csv, neither existing yet: refused" "the same file as --csv" \
  "${S5[@]}" --csv "$TMP/fs/res/new.csv" --checkpoint "$TMP/fs/res/../res/new.csv"
check "the CSV is untouched by those refusals" "changed" [ "$(sha256sum <"$TMP/fs/res/runs.csv")" = "$before" ]
echo "my notes" >"$TMP/fs/notes.txt"
expect_error "--checkpoint on a file that is not a checkpoint: refused" "not a partrain checkpoint" \
  "${S5[@]}" --checkpoint "$TMP/fs/notes.txt"
check "that file is untouched" "$(head -c 80 "$TMP/fs/notes.txt")" [ "$(cat "$TMP/fs/notes.txt")" = "my notes" ]
ln -s "$TMP/fs/ck" "$TMP/fs/latest.ck"
expect_error "--checkpoint a symbolic link (to a checkpoint-to-be): refused, the link kept" "symbolic link" \
  "${S5[@]}" --csv none --checkpoint "$TMP/fs/latest.ck"
check "that link is still a link" "$(ls -l "$TMP/fs/latest.ck" 2>&1)" test -L "$TMP/fs/latest.ck"
echo keep >"$TMP/fs/victim"; ln -s "$TMP/fs/victim" "$TMP/fs/ck.tmp"
"${S5[@]}" --csv none --checkpoint "$TMP/fs/ck" >/dev/null 2>"$TMP/fs/err"; rc=$?
check "a symbolic link at FILE.tmp is never followed (its target kept), the checkpoint written" \
  "exit $rc, victim '$(cat "$TMP/fs/victim")': $(head -c 200 "$TMP/fs/err")" \
  eval '[ $rc = 0 ] && [ "$(cat "$TMP/fs/victim")" = keep ] && python3 scripts/checkpoint.py "$TMP/fs/ck" >/dev/null'
rm -f "$TMP/fs/shared.ck"
for k in 1 2 3; do "${S5[@]}" --epochs 6 --csv none --checkpoint "$TMP/fs/shared.ck" >/dev/null 2>"$TMP/fs/par$k.err" & done
wait
warnings=$(cat "$TMP/fs"/par*.err | grep -c warning)
left=$(ls "$TMP/fs" | grep -c '^shared.ck.tmp')
check "three runs sharing --checkpoint: no warning, a whole file, no temporary file left" \
  "$warnings warnings, $left temporary files: $(cat "$TMP/fs"/par*.err | head -c 200)" \
  eval '[ $warnings = 0 ] && [ $left = 0 ] && python3 scripts/checkpoint.py "$TMP/fs/shared.ck" >/dev/null'

# ---- 6. limits
rm -f "$TMP/lim.csv"
"${S5[@]}" --csv "$TMP/lim.csv" >/dev/null 2>&1; "${S5[@]}" --csv "$TMP/lim.csv" >/dev/null 2>&1
size=$(stat -c %s "$TMP/lim.csv")
( ulimit -f 1; exec "${S5[@]}" --csv "$TMP/lim.csv" ) >/dev/null 2>"$TMP/lim.err"; rc=$?
check "ulimit -f: a CSV append over the limit writes nothing torn, exit 1, the row on stderr" \
  "exit $rc, $size -> $(stat -c %s "$TMP/lim.csv") bytes: $(head -c 200 "$TMP/lim.err")" \
  eval '[ $rc = 1 ] && [ "$(stat -c %s "$TMP/lim.csv")" = $size ] && grep -q "^run_id," "$TMP/lim.err" && grep -q "File too large" "$TMP/lim.err"'
rm -rf "$TMP/limck"; mkdir "$TMP/limck"
( ulimit -f 100; exec "${S5[@]}" --csv none --checkpoint "$TMP/limck/ck" ) >/dev/null 2>"$TMP/lim.err"; rc=$?
check "ulimit -f: a checkpoint over the limit is a warning, training goes on, exit 0, nothing left, said at the end" \
  "exit $rc, files '$(ls "$TMP/limck")': $(head -c 300 "$TMP/lim.err")" \
  eval '[ $rc = 0 ] && [ -z "$(ls "$TMP/limck")" ] && grep -q "warning: .*File too large" "$TMP/lim.err" && tail -1 "$TMP/lim.err" | grep -q "no checkpoint was written"'
( ulimit -v 400000; exec serial/serial --data $DATA --train 300 --test 50 --epochs 1 --hidden 8192,8192 --csv "$TMP/err.csv" ) >/dev/null 2>"$TMP/lim.err"; rc=$?
check "ulimit -v: an 8192x8192 net is refused with the estimate, exit 2, before loading" \
  "exit $rc: $(head -c 300 "$TMP/lim.err")" \
  eval '[ $rc = 2 ] && [ "$(wc -l <"$TMP/lim.err")" = 1 ] && grep -q "needs .* the process.s limit (ulimit -v" "$TMP/lim.err"'
[ -x openmp/openmp ] && OMP_NUM_THREADS=1000 expect_error "openmp: OMP_NUM_THREADS=1000 refused like --threads 1000" \
  "OMP_NUM_THREADS=1000: at most 256" openmp/openmp --data $DATA --epochs 1

# ---- 7. data identity
rm -rf "$TMP/di"; mkdir -p "$TMP/di/mnist"; cp -L $DATA/*-ubyte* "$TMP/di/mnist/"
serial/serial --data "$TMP/di/mnist" --train 300 --test 50 --epochs 2 --quiet --csv none --checkpoint "$TMP/di/ck" >/dev/null 2>&1
python3 -c 'import sys; p = sys.argv[1]; d = bytearray(open(p, "rb").read()); d[16 + 100] ^= 0x40; open(p, "wb").write(d)' \
  "$(ls "$TMP/di/mnist"/train-images* | head -1)"
expect_error "--resume after the training images changed: refused naming the data" "the data differ" \
  serial/serial --data "$TMP/di/mnist" --train 300 --test 50 --epochs 3 --quiet --resume "$TMP/di/ck"
"${S5[@]}" --csv "$TMP/di/runs.csv" --checkpoint "$TMP/di/fin" >/dev/null 2>&1
for k in 1 2; do "${S5[@]}" --csv "$TMP/di/runs.csv" --resume "$TMP/di/fin" --checkpoint "$TMP/di/fin" >/dev/null 2>"$TMP/di/err$k"; done
check "a finished checkpoint resumed twice with --csv: no new row, said once each time" \
  "$(csv_rows "$TMP/di/runs.csv") rows: $(head -c 200 "$TMP/di/err2")" \
  eval '[ "$(csv_rows "$TMP/di/runs.csv")" = 1 ] && grep -q "nothing left to train, no new CSV row" "$TMP/di/err2"'

# ---- 8. locales
unset_c=""
for f in run_all.sh bench/*.sh scripts/*.sh scripts/slurm/lib.sh; do
  grep -qE '\b(awk|printf|sort)\b' "$f" && ! grep -qE '^ *export LC_ALL=C' "$f" && unset_c="$unset_c $f"
done
check "run_all.sh and every bench/ and scripts/ shell script with awk, printf or sort sets LC_ALL=C" "missing in:$unset_c" [ -z "$unset_c" ]
de=""
if locale -a 2>/dev/null | grep -qix 'de_DE.utf-\?8'; then de=de_DE.UTF-8
elif command -v localedef >/dev/null && mkdir -p "$TMP/locale" && localedef -i de_DE -f UTF-8 "$TMP/locale/de_DE.UTF-8" >/dev/null 2>&1; then
  export LOCPATH=$TMP/locale; de=de_DE.UTF-8
fi
if [ -z "$de" ] || [ "$(LC_ALL=$de awk 'BEGIN { printf "%.1f", 0.5 }' 2>/dev/null)" != "0,5" ]; then
  skip "locales: openmp-bench under de_DE.UTF-8" "no German locale (scripts/setup.sh generates it; localedef failed)"
elif [ ! -x openmp/openmp ]; then
  skip "locales: openmp-bench under de_DE.UTF-8" "openmp/openmp not built"
else
  for loc in C "$de"; do
    rm -f "$TMP/loc-$loc.csv"
    LC_ALL=$loc PARTRAIN_BENCH_LOCK=$TMP/bench.lock timeout $LIMIT bench/openmp-bench.sh --data $DATA --train 300 \
      --epochs 2 --runs 1 --tries 1 --idle-wait 0 --no-torch --threads 1 --batches 64 --csv "$TMP/loc-$loc.csv" \
      >"$TMP/loc.out" 2>&1 || echo "exit $?" >>"$TMP/loc-$loc.fail"
  done
  shape() { awk -F, '{ print NF }' "$1" | sort | uniq -c | tr -s ' '; }
  check "locales: bench/openmp-bench.sh's CSV under $de has the header and field counts it has under C" \
    "C: $(shape "$TMP/loc-C.csv" 2>&1) / $de: $(shape "$TMP/loc-$de.csv" 2>&1) $(cat "$TMP"/loc-*.fail 2>/dev/null)" \
    eval '[ -s "$TMP/loc-C.csv" ] && [ "$(head -1 "$TMP/loc-C.csv")" = "$(head -1 "$TMP/loc-$de.csv")" ] && [ "$(shape "$TMP/loc-C.csv")" = "$(shape "$TMP/loc-$de.csv")" ] && ! grep -q "[0-9],[0-9][0-9]*,[01]$" "$TMP/loc-$de.csv"'
  unset LOCPATH
fi

# ---- 9. script inputs
good=$TMP/fs/res/runs.csv
{ cat "$good"; printf '\xff\xfe,serial\n'; } >"$TMP/in-bytes.csv"
{ cat "$good"; printf 'x,"serial,own-gemm\n'; tail -1 "$good"; } >"$TMP/in-quote.csv"
{ cat "$good"; printf 'x,serial\n'; } >"$TMP/in-short.csv"
for kind in bytes quote short; do
  python3 scripts/summarize.py table "$TMP/in-$kind.csv" >/dev/null 2>"$TMP/in.err"; rc=$?
  check "summarize.py on a CSV with $kind: one line naming the file and line, exit 2" "exit $rc: $(head -c 300 "$TMP/in.err")" \
    eval '[ $rc = 2 ] && [ "$(wc -l <"$TMP/in.err")" = 1 ] && grep -q "in-$kind.csv: line [0-9]" "$TMP/in.err"'
done
mkdir -p "$TMP/rep"; sed '2s/,300,50,/,inf,50,/' "$good" >"$TMP/rep/runs.csv"
python3 scripts/report.py --results "$TMP/rep" --out "$TMP/rep/REPORT.md" >/dev/null 2>"$TMP/in.err"; rc=$?
check "report.py with train_n=inf: the row named and left out, the report written, exit 2, no traceback" \
  "exit $rc: $(head -c 300 "$TMP/in.err")" \
  eval '[ $rc = 2 ] && [ -s "$TMP/rep/REPORT.md" ] && grep -q "runs.csv: line 2: train_n=inf" "$TMP/in.err" && ! grep -q Traceback "$TMP/in.err"'
mkdir -p "$TMP/"$'d\xff'; cp -L $DATA/*-ubyte* "$TMP/"$'d\xff'/
serial/serial --data "$TMP/"$'d\xff' --train 300 --test 50 --epochs 1 --quiet --csv none --checkpoint "$TMP/nonutf.ck" >/dev/null 2>&1
python3 scripts/checkpoint.py "$TMP/nonutf.ck" >"$TMP/in.out" 2>"$TMP/in.err"; rc=$?
check "checkpoint.py: a data directory name that is not UTF-8 is not 'corrupted'" "exit $rc: $(head -c 200 "$TMP/in.err")" \
  eval '[ $rc = 0 ] && grep -q "^epochs done: *1" "$TMP/in.out"'

# ---- 10. a build for another CPU (common/isa_check.c): serial built with an instruction set
# this CPU lacks (-march=native plus it) says so in one line and exits 1, no SIGILL
isa="" cpu_flag=""
for f in avx512fp16:avx512_fp16 avx512bf16:avx512_bf16 avx512f:avx512f avx2:avx2; do
  grep -qw "${f#*:}" /proc/cpuinfo || { isa=${f%%:*}; cpu_flag=${f#*:}; break; }
done
if [ -z "$isa" ] || [ "$(uname -m)" != x86_64 ]; then
  skip "a build for another CPU" "this CPU has every set the test could build for (avx512fp16, avx512bf16, avx512f, avx2)"
elif ! cc -std=c11 -O2 -march=native -m"$isa" -Icommon serial/serial.c common/idx.c common/options.c common/results.c \
       common/checkpoint.c common/isa_check.c -o "$TMP/serial-isa" -lz -lm 2>"$TMP/isa.err"; then
  fail "a build for another CPU" "cc -m$isa failed: $(head -c 300 "$TMP/isa.err")"
else
  "$TMP/serial-isa" --data $DATA --train 300 --test 50 --epochs 1 --csv "$TMP/isa.csv" >"$TMP/isa.out" 2>"$TMP/isa.err"; rc=$?
  check "serial built with -m$isa on a CPU without $cpu_flag: one line naming $isa and the fixes, exit 1, no row" \
    "exit $rc: $(head -c 300 "$TMP/isa.err")" \
    eval '[ $rc = 1 ] && [ "$(wc -l <"$TMP/isa.err")" = 1 ] && grep -q "this build uses $isa instructions.*make PORTABLE=1" "$TMP/isa.err" &&
      [ ! -s "$TMP/isa.out" ] && [ ! -e "$TMP/isa.csv" ]'
fi
finish
