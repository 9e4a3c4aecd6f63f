#!/usr/bin/env bash
# tests/test_comm.sh — bench/comm and bench/comm.sh (docs/comm.md): every op's sum is
# verified at P = 2 and across pseudo-nodes (P = 4, PARTRAIN_RANKS_PER_NODE=2: 2 nodes x 2),
# the CSV has results/comm.csv's exact header and one row per (op, size) with the run's
# ranks and nodes, the table has the documented columns, the trainers' gradient bytes are
# among the sizes; bad flags give one line and exit 2 before any work; bench/comm.sh
# appends every P's rows and writes one table per P, and refuses bad options.
# Timings are never asserted (only that they are positive numbers).
# Needs mpirun and mpicc; without them every check is skipped with that reason.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
RUN=scripts/mpirun.sh
LIMIT=$((120 * SLOWDOWN))
HEADER=transport,op,ranks,nodes,ranks_per_node,bytes,iterations,min_us,avg_us,max_us,timestamp,gap_us

if ! command -v mpirun >/dev/null || ! command -v "${MPICC:-mpicc}" >/dev/null; then
  skip "bench/comm" "mpirun/mpicc not found (apt-get install openmpi-bin libopenmpi-dev)"; finish
fi
[ -x bench/comm ] || { fail "bench/comm built" "missing (make all)"; finish; }
# small and quick: 4 B .. 1 KiB, the default net's gradient, 20 timed calls each
QUICK=(--max-bytes 1024 --model-sides 28 --iters 20 --warmup 1)
# the default net's gradient as the trainers lay it out: 235,152 floats (padded), 4 bytes each
GRAD=$((4 * 235152))

# csv_check CSV RANKS NODES ROWS [GAP]: the header, the row count, ranks/nodes on every row,
# positive times with min <= avg <= max, iterations 20 (barrier too), gap_us GAP (empty:
# OSU's way; "measured": a positive number of microseconds on every row)
csv_check() {
  local csv=$1 p=$2 n=$3 rows=$4 gap=${5:-} bad
  check "CSV header is comm.csv's" "$(head -n 1 "$csv")" [ "$(head -n 1 "$csv")" = "$HEADER" ]
  check "CSV has $rows rows (4 ops x 10 sizes + barrier)" "$(csv_rows "$csv") rows" [ "$(csv_rows "$csv")" = "$rows" ]
  bad=$(awk -F, -v p="$p" -v n="$n" -v g="$gap" 'NR > 1 && !(NF == 12 && $3 == p && $4 == n && $7 == 20 && $8 > 0 && $8 <= $9 && $9 <= $10 &&
          ($2 == "barrier") == ($6 == 0) && $11 ~ /^20[0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-9:]+Z$/ && (g == "measured" ? $12 ~ /^[0-9]+$/ && $12 > 0 : $12 == g))' "$csv" | head -n 2)
  check "every row: ranks $p, nodes $n, 20 iterations, 0 < min <= avg <= max, a UTC timestamp, gap_us '$gap'" "bad rows: $bad" [ -z "$bad" ]
}

# ---- P = 2, one node, every op
timeout $LIMIT $RUN 2 bench/comm "${QUICK[@]}" --transport shm --csv "$TMP/c.csv" --dat "$TMP/c.dat" >"$TMP/out" 2>&1; rc=$?
check "bench/comm P = 2: exit 0, every sum verified" "exit $rc: $(tail -n 3 "$TMP/out")" \
  grep -q "^comm: shm | 2 ranks (1 node, up to 2 per node) | 10 sizes x 4 ops + barrier | .* | every sum verified" "$TMP/out"
csv_check "$TMP/c.csv" 2 1 41
# the same with the calls back to back (no synchronization between them)
timeout $LIMIT $RUN 2 bench/comm "${QUICK[@]}" --back-to-back --transport shm --csv "$TMP/b.csv" >"$TMP/out-b" 2>&1; rc=$?
check "bench/comm --back-to-back: exit 0, every sum verified" "exit $rc: $(tail -n 3 "$TMP/out-b")" \
  grep -q "^comm: shm | 2 ranks .* | 10 sizes x 4 ops + barrier | .* | every sum verified" "$TMP/out-b"
csv_check "$TMP/b.csv" 2 1 41 0
# spaced as a trainer's ranks space them: one training step on 512 rows between calls,
# only the calls timed, gap_us the step's measured time; --max-bytes 0: only the gradient
timeout $LIMIT $RUN 2 bench/comm --model-sides 28 --iters 20 --warmup 1 --max-bytes 0 --gap-rows 512 --transport shm \
  --csv "$TMP/g.csv" --dat "$TMP/g.dat" >"$TMP/out-g" 2>&1; rc=$?
check "bench/comm --gap-rows 512 --max-bytes 0: exit 0, every sum verified, the gradient alone" "exit $rc: $(tail -n 3 "$TMP/out-g")" \
  grep -q "^comm: shm | 2 ranks .* | 1 sizes x 4 ops + barrier | .* | every sum verified" "$TMP/out-g"
csv_check "$TMP/g.csv" 2 1 5 measured
gap=$(awk -F, 'NR > 1 { s += $12; n++ } END { printf "%d", s / n }' "$TMP/g.csv")
# a step on 512 rows is about 3 x 512 x 235k multiply-adds: well over 100 us on any core
check "--gap-rows: gap_us is the step's measured time (> 100 us)" "gap_us: $(cut -d, -f12 "$TMP/g.csv" | tr '\n' ' ')" \
  [ "$gap" -gt 100 ]
secs=$(sed -n 's/^comm: .* | \([0-9.]*\) s | every sum.*/\1/p' "$TMP/out-g")
check "--gap-rows: the steps were computed (5 ops x 20 steps of gap_us at least)" "took '$secs' s, gap_us $gap" \
  awk -v s="$secs" -v g="$gap" 'BEGIN { exit !(s + 0.05 >= 100 * g * 1e-6 * 0.9) }'
check "--gap-rows: the table says how the calls were spaced" "$(grep '^# calls' "$TMP/g.dat")" \
  grep -q "^# calls back to back, one training step on 512 rows between two calls" "$TMP/g.dat"
check "the default net's gradient ($GRAD bytes) is measured, by every op" "$(grep -c ",$GRAD," "$TMP/c.csv") rows" \
  [ "$(grep -c "^shm,[a-z-]*,2,1,2,$GRAD," "$TMP/c.csv")" = 4 ]
check "the sizes are 4, 8, .. 1024 and the gradient" "$(cut -d, -f6 "$TMP/c.csv" | sort -un | tr '\n' ' ')" \
  [ "$(awk -F, 'NR > 1 && $2 == "allreduce" { printf "%s ", $6 }' "$TMP/c.csv")" = "4 8 16 32 64 128 256 512 1024 $GRAD " ]
# the table: 10 data rows of 17 columns, column 1 the bytes, column 5 allreduce's iterations;
# the --dat file is stdout with the verdict commented
cols=$(grep -v '^#' "$TMP/c.dat" | awk '{ print NF }' | sort -u | tr '\n' ' ')
check "the --dat table: 10 rows x 17 columns (bytes + 4 per op)" "columns: $cols, rows $(grep -vc '^#' "$TMP/c.dat")" \
  [ "$cols" = "17 " -a "$(grep -vc '^#' "$TMP/c.dat")" = 10 ]
check "the --dat table's column names and verdict" "$(grep '^#' "$TMP/c.dat" | cut -c1-100)" \
  grep -q "^# bytes allreduce_avg_us allreduce_min_us allreduce_max_us allreduce_iters reduce-bcast_avg_us" "$TMP/c.dat"
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
expect_error "bench/comm: --gap-rows 0" "--gap-rows" bench/comm --gap-rows 0
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
out=$(PARTRAIN_BENCH_LOCK=$TMP/bench.lock timeout $LIMIT bench/comm.sh --ranks-list "2 3" --transport shm --gap-rows "8 16" --gap-max-ranks 2 \
  --csv "$TMP/s.csv" --dat "$TMP/s.dat" -- --max-bytes 64 --model-sides none --iters 5 --warmup 0 2>&1); rc=$?
check "bench/comm.sh --ranks-list '2 3' --gap-rows '8 16' --gap-max-ranks 2: exit 0" "exit $rc: $(tail -n 3 <<<"$out")" [ $rc = 0 ]
check "bench/comm.sh: the rows of both runs (2 x (4 ops x 5 sizes + barrier) OSU's way; at P = 2 alone 2 steps x 4 ops at the gradient)" \
  "$(csv_rows "$TMP/s.csv") rows" \
  [ "$(csv_rows "$TMP/s.csv")" = 50 -a "$(cut -d, -f3 "$TMP/s.csv" | sort -u | tr '\n' ' ')" = "2 3 ranks " ]
check "bench/comm.sh --gap-rows: P = 2's gradient after steps of 8 and 16 rows, each op twice; none at P = 3 (above --gap-max-ranks)" \
  "$(awk -F, 'NR > 1 && $12 != "" { print $3, $2, $6 }' "$TMP/s.csv" | sort | uniq -c)" \
  [ "$(awk -F, -v g=$GRAD 'NR > 1 && $12 != "" && $6 == g && $3 == 2 && $2 != "barrier" { print $2 }' "$TMP/s.csv" | sort | uniq -c | awk '$1 == 2' | wc -l)" = 4 -a \
    "$(awk -F, 'NR > 1 && $12 != ""' "$TMP/s.csv" | wc -l)" = 8 ]
blocks=$(awk 'BEGIN { b = 1 } /^$/ { e++; next } { if (e >= 2) b++; e = 0 } END { print b }' "$TMP/s.dat")
check "bench/comm.sh --dat: one block per P, gnuplot indices 0 and 1" "$blocks blocks: $(grep -c '^# bench/comm' "$TMP/s.dat") headers" \
  [ "$blocks" = 2 -a "$(grep -c '^# bench/comm: transport shm, [23] ranks' "$TMP/s.dat")" = 2 ]
# (--csv before `--`: expect_error would append its own after the arguments)
expect_error "bench/comm.sh: bad --ranks-list" "--ranks-list" bench/comm.sh --csv "$TMP/err.csv" --ranks-list "2 x"
expect_error "bench/comm.sh: bad --gap-rows" "--gap-rows" bench/comm.sh --csv "$TMP/err.csv" --gap-rows "0 16"
expect_error "bench/comm.sh: bad --gap-max-ranks" "--gap-max-ranks" bench/comm.sh --csv "$TMP/err.csv" --gap-max-ranks 0
expect_error "bench/comm.sh: --ranks-list with a fixed launcher" "{P}" bench/comm.sh --csv "$TMP/err.csv" --launcher "$RUN 2" --ranks-list 2
expect_error "bench/comm.sh: bench/comm's own flags checked first" "--iters" bench/comm.sh --csv "$TMP/err.csv" -- --iters 0
expect_error "bench/comm.sh: a CSV of another schema" "not bench/comm's" bench/comm.sh --csv "$TMP/other.csv"
check "bench/comm.sh --help is its header" "$(bench/comm.sh --help 2>&1 | head -n 2)" \
  grep -q "^Usage: bench/comm.sh" <(bench/comm.sh --help)
finish
