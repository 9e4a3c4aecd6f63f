#!/usr/bin/env bash
# tests/test_comm.sh — bench/comm and bench/comm.sh (docs/comm.md): every op's sum is
# verified at P = 2, 3 and across pseudo-nodes (P = 4, PARTRAIN_RANKS_PER_NODE=2: 2 nodes x 2),
# the CSV has bench/comm's exact header and one row per (op, size, repeat) with the run's
# ranks, nodes, warm-up and iteration counts (the OSU-like defaults: 100 timed calls below
# 1 MiB, 20 from there on, 20 warm-ups), algbw = bytes / avg and nccl-tests' busbw =
# algbw x 2(P-1)/P (allreduce, iallreduce, hierarchical), x 2 (reduce-bcast); the table has
# the documented columns, the trainers' gradient bytes are among the sizes; bad flags (the
# removed --back-to-back, --gap-rows, --target-ms too) give one line and exit 2 before any
# work; bench/comm.sh appends every P's rows and writes one table per P.
# Timings are never asserted (only that they are positive and ordered min <= avg <= max).
# Needs mpirun and mpicc; without them every check is skipped with that reason.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
RUN=scripts/mpirun.sh
LIMIT=$((120 * SLOWDOWN))
HEADER=transport,op,ranks,nodes,ranks_per_node,bytes,repeat,warmup,iterations,min_us,avg_us,max_us,algbw_gbs,busbw_gbs,timestamp

if ! command -v mpirun >/dev/null || ! command -v "${MPICC:-mpicc}" >/dev/null; then
  skip "bench/comm" "mpirun/mpicc not found (apt-get install openmpi-bin libopenmpi-dev)"; finish
fi
[ -x bench/comm ] || { fail "bench/comm built" "missing (make all)"; finish; }
# small and quick: 4 B .. 1 KiB, the default net's gradient, 20 timed calls each
QUICK=(--max-bytes 1024 --model-sides 28 --iters 20 --warmup 1)
# the default net's gradient as the trainers lay it out: 235,152 floats (padded), 4 bytes each
GRAD=$((4 * 235152))

# csv_check CSV RANKS NODES ROWS: the header, the row count, ranks/nodes on every row, warm-up
# 1 and 20 iterations, positive times with min <= avg <= max, algbw = bytes / avg (GB/s),
# busbw = algbw x the op's factor at P, a UTC timestamp
csv_check() {
  local csv=$1 p=$2 n=$3 rows=$4 bad
  check "CSV header is bench/comm's" "$(head -n 1 "$csv")" [ "$(head -n 1 "$csv")" = "$HEADER" ]
  check "CSV has $rows rows" "$(csv_rows "$csv") rows" [ "$(csv_rows "$csv")" = "$rows" ]
  bad=$(awk -F, -v p="$p" -v n="$n" 'function near(a, b) { return a - b <= 1e-3 + 1e-3 * b && b - a <= 1e-3 + 1e-3 * b }
    NR > 1 { f = ($2 == "barrier") ? 0 : ($2 == "reduce-bcast") ? 2 : 2 * (p - 1) / p; alg = $11 > 0 ? $6 / $11 / 1e3 : 0 }
    NR > 1 && !(NF == 15 && $3 == p && $4 == n && $7 == 1 && $8 == 1 && $9 == 20 && $10 > 0 && $10 <= $11 && $11 <= $12 &&
          ($2 == "barrier") == ($6 == 0) && near($13, alg) && near($14, alg * f) && $15 ~ /^20[0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-9:]+Z$/)' "$csv" | head -n 2)
  check "every row: ranks $p, nodes $n, warm-up 1, 20 iterations, 0 < min <= avg <= max, algbw, busbw (factor 2(P-1)/P, reduce-bcast 2), a UTC timestamp" "bad rows: $bad" [ -z "$bad" ]
}

# ---- P = 2, one node, every op
timeout $LIMIT $RUN 2 bench/comm "${QUICK[@]}" --transport shm --csv "$TMP/c.csv" --dat "$TMP/c.dat" >"$TMP/out" 2>&1; rc=$?
check "bench/comm P = 2: exit 0, every sum verified" "exit $rc: $(tail -n 3 "$TMP/out")" \
  grep -q "^comm: shm | 2 ranks (1 node, up to 2 per node) | 10 sizes x 4 ops + barrier x 1 repeat | .* | every sum verified" "$TMP/out"
csv_check "$TMP/c.csv" 2 1 41
# P = 3: busbw's factor 2(P-1)/P = 4/3 (checked in csv_check)
timeout $LIMIT $RUN 3 bench/comm "${QUICK[@]}" --ops allreduce,reduce-bcast --transport shm --csv "$TMP/c3.csv" >"$TMP/out3" 2>&1; rc=$?
check "bench/comm P = 3: exit 0, every sum verified" "exit $rc: $(tail -n 3 "$TMP/out3")" \
  grep -q "^comm: shm | 3 ranks .* | every sum verified" "$TMP/out3"
csv_check "$TMP/c3.csv" 3 1 20
# the default counts: 20 warm-ups; 100 timed calls below 1 MiB (the gradient), 20 at 1 and
# 2 MiB; --repeats 2: two rows per size
timeout $LIMIT $RUN 2 bench/comm --ops allreduce --min-bytes 1048576 --max-bytes 2097152 --model-sides 28 --repeats 2 \
  --transport shm --csv "$TMP/d.csv" >"$TMP/out-d" 2>&1; rc=$?
got=$(awk -F, 'NR > 1 { printf "%s:%s:%s:%s ", $6, $7, $8, $9 }' "$TMP/d.csv")
check "default counts: 20 warm-ups, 100 timed calls below 1 MiB, 20 from 1 MiB on; --repeats 2: repeats 1 and 2 (exit $rc)" "$got" \
  [ "$got" = "$GRAD:1:20:100 $GRAD:2:20:100 1048576:1:20:20 1048576:2:20:20 2097152:1:20:20 2097152:2:20:20 " ]
check "the default net's gradient ($GRAD bytes) is measured, by every op" "$(grep -c ",$GRAD," "$TMP/c.csv") rows" \
  [ "$(grep -c "^shm,[a-z-]*,2,1,2,$GRAD," "$TMP/c.csv")" = 4 ]
check "the sizes are 4, 8, .. 1024 and the gradient" "$(cut -d, -f6 "$TMP/c.csv" | sort -un | tr '\n' ' ')" \
  [ "$(awk -F, 'NR > 1 && $2 == "allreduce" { printf "%s ", $6 }' "$TMP/c.csv")" = "4 8 16 32 64 128 256 512 1024 $GRAD " ]
# the table: 10 data rows of 21 columns (bytes, then avg min max iterations busbw per op);
# the --dat file is stdout with the verdict commented
cols=$(grep -v '^#' "$TMP/c.dat" | awk '{ print NF }' | sort -u | tr '\n' ' ')
check "the --dat table: 10 rows x 21 columns (bytes + 5 per op)" "columns: $cols, rows $(grep -vc '^#' "$TMP/c.dat")" \
  [ "$cols" = "21 " -a "$(grep -vc '^#' "$TMP/c.dat")" = 10 ]
check "the --dat table's column names" "$(grep '^#' "$TMP/c.dat" | cut -c1-100)" \
  grep -q "^# bytes allreduce_avg_us allreduce_min_us allreduce_max_us allreduce_iters allreduce_busbw_gbs reduce-bcast_avg_us" "$TMP/c.dat"
check "the table says how it timed (OSU's way, a barrier before each call)" "$(grep "^# OSU" "$TMP/c.dat")" \
  grep -q "^# OSU's way: 1 warm-up calls, then 20 timed calls below 1048576 bytes .* each after an untimed MPI_Barrier" "$TMP/c.dat"
check "stdout is the --dat table with an uncommented verdict" "differs" \
  [ "$(grep -v '^comm: ' "$TMP/out" | grep -v '^# comm: ')" = "$(grep -v '^# comm: ' "$TMP/c.dat")" ]
if command -v gnuplot >/dev/null; then
  ok=0; gnuplot -e "set terminal dumb; plot '$TMP/c.dat' u 1:2 w lp, '' u 1:10 w lp" >"$TMP/gp" 2>&1 &&
    ! grep -qi "error\|warning" "$TMP/gp" && ok=1
  check "gnuplot reads the table" "$(head -c 300 "$TMP/gp")" [ $ok = 1 ]
else
  skip "gnuplot reads the table" "gnuplot missing (apt-get install gnuplot-nox)"
fi

# ---- P = 4 as 2 pseudo-nodes x 2 ranks: the hierarchical allreduce's leaders' step runs
PARTRAIN_RANKS_PER_NODE=2 timeout $LIMIT $RUN 4 bench/comm "${QUICK[@]}" --transport shm --csv "$TMP/h.csv" >"$TMP/out" 2>&1; rc=$?
check "bench/comm P = 4, 2 pseudo-nodes: exit 0, every sum verified" "exit $rc: $(tail -n 3 "$TMP/out")" \
  grep -q "^comm: shm | 4 ranks (2 nodes, up to 2 per node) | .* | every sum verified" "$TMP/out"
csv_check "$TMP/h.csv" 4 2 41
# appending: a second run adds its rows under the one header
timeout $LIMIT $RUN 2 bench/comm "${QUICK[@]}" --ops hierarchical --transport tcp --csv "$TMP/h.csv" >"$TMP/out" 2>&1
check "a second run appends (one header, 41 + 10 rows, its own transport and ops)" "$(head -n 1 "$TMP/h.csv"); $(csv_rows "$TMP/h.csv") rows" \
  [ "$(grep -c '^transport,' "$TMP/h.csv")" = 1 -a "$(csv_rows "$TMP/h.csv")" = 51 -a "$(grep -c '^tcp,hierarchical,2,1,2,' "$TMP/h.csv")" = 10 ]

# ---- bad input: one line, exit 2, nothing written
expect_error "bench/comm: unknown op" "--ops" --label comm $RUN 2 bench/comm --ops allreduce,gather
expect_error "bench/comm: repeated op" "--ops" --label comm $RUN 2 bench/comm --ops barrier,barrier
expect_error "bench/comm: --min-bytes not a multiple of 4" "multiple of 4" bench/comm --min-bytes 6
expect_error "bench/comm: --min-bytes above --max-bytes" "larger than --max-bytes" bench/comm --min-bytes 64 --max-bytes 32
expect_error "bench/comm: bad --transport label" "--transport" bench/comm --transport 'a,b'
expect_error "bench/comm: bad --model-sides" "--model-sides" bench/comm --model-sides 28,
expect_error "bench/comm: --iters 0" "--iters" bench/comm --iters 0
expect_error "bench/comm: --repeats 0" "--repeats" bench/comm --repeats 0
for gone in --back-to-back "--gap-rows 8" "--target-ms 20"; do
  # shellcheck disable=SC2086  # the flag and its value
  expect_error "bench/comm: the removed $gone is an unknown option" "unknown option" bench/comm $gone
done
expect_error "bench/comm: --max-bytes 0 with no model sides" "no size" bench/comm --max-bytes 0 --model-sides none
expect_error "bench/comm: bad PARTRAIN_RANKS_PER_NODE" "PARTRAIN_RANKS_PER_NODE" --label comm \
  env PARTRAIN_RANKS_PER_NODE=x $RUN 2 bench/comm "${QUICK[@]}"
echo "program,variant" >"$TMP/other.csv"
expect_error "bench/comm: a CSV of another schema is refused" "not bench/comm's" --label comm \
  $RUN 2 bench/comm "${QUICK[@]}" --csv "$TMP/other.csv"
check "... and left as it was" "$(cat "$TMP/other.csv")" [ "$(cat "$TMP/other.csv")" = "program,variant" ]

# ---- bench/comm.sh: two rank counts, rows appended once, one table per P (a private
# benchmark lock: this checks outputs, not timings, so it must not wait for another job's
# benchmark holding /tmp/partrain-bench.lock)
out=$(PARTRAIN_BENCH_LOCK=$TMP/bench.lock timeout $LIMIT bench/comm.sh --ranks-list "2 3" --transport shm \
  --csv "$TMP/s.csv" --dat "$TMP/s.dat" -- --max-bytes 64 --model-sides none --iters 5 --warmup 0 2>&1); rc=$?
check "bench/comm.sh --ranks-list '2 3': exit 0" "exit $rc: $(tail -n 3 <<<"$out")" [ $rc = 0 ]
check "bench/comm.sh: the rows of both runs (2 x (4 ops x 5 sizes + barrier))" "$(csv_rows "$TMP/s.csv") rows" \
  [ "$(csv_rows "$TMP/s.csv")" = 42 -a "$(cut -d, -f3 "$TMP/s.csv" | sort -u | tr '\n' ' ')" = "2 3 ranks " ]
blocks=$(awk 'BEGIN { b = 1 } /^$/ { e++; next } { if (e >= 2) b++; e = 0 } END { print b }' "$TMP/s.dat")
check "bench/comm.sh --dat: one block per P, gnuplot indices 0 and 1" "$blocks blocks: $(grep -c '^# bench/comm' "$TMP/s.dat") headers" \
  [ "$blocks" = 2 -a "$(grep -c '^# bench/comm: transport shm, [23] ranks' "$TMP/s.dat")" = 2 ]
# (--csv before `--`: expect_error would append its own after the arguments)
expect_error "bench/comm.sh: bad --ranks-list" "--ranks-list" bench/comm.sh --csv "$TMP/err.csv" --ranks-list "2 x"
expect_error "bench/comm.sh: the removed --gap-rows is an unknown option" "unknown option" bench/comm.sh --csv "$TMP/err.csv" --gap-rows "8 16"
expect_error "bench/comm.sh: --ranks-list with a fixed launcher" "{P}" bench/comm.sh --csv "$TMP/err.csv" --launcher "$RUN 2" --ranks-list 2
expect_error "bench/comm.sh: bench/comm's own flags checked first" "--iters" bench/comm.sh --csv "$TMP/err.csv" -- --iters 0
expect_error "bench/comm.sh: a CSV of another schema" "not bench/comm's" bench/comm.sh --csv "$TMP/other.csv"
check "bench/comm.sh --help is its header" "$(bench/comm.sh --help 2>&1 | head -n 2)" \
  grep -q "^Usage: bench/comm.sh" <(bench/comm.sh --help)
finish
