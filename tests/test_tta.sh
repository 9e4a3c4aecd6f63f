#!/usr/bin/env bash
# tests/test_tta.sh — the time-to-accuracy sweep (bench/tta-sweep.sh, run_all.sh's step
# tta), its figure (plots/tta.gp) and report section (scripts/reporting/tta.py).
#
# - run_all.sh --smoke --only tta: tta.csv with the expected rows (batch 32 and 512, serial
#   and mpi allreduce P = 2, seed 1, target 60 %: serial reaches it at 32 and not at 512,
#   both deterministic), tta-best.txt says why the default strategy, the strategy's epochs
#   to target are serial's, the figure is drawn and the report has the section.
# - the strategy is read from a bench CSV by column name when one has C-worker rows.
# - bad input: one line, exit 2, nothing written; every batch refused by the memory check:
#   the same. A run whose loss diverges is recorded (tta-diverged.txt), not fatal, and the
#   report says "diverged".
# - the report section from tests/fixtures/tta.csv (a batch no serial seed reached, one
#   two of three best seeds reached): the table, the "stops falling" batches the fixture
#   was built for (serial 128, best 256), 16 of 18 equal pairs; the figure's data puts the
#   not-reached serial at its cap, never at zero, and the plot step draws it.
# - scripts/tta_sweep.py stops_falling and grows on points whose answers are known.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
. scripts/lib.sh   # PARTRAIN_PYTHON
export PARTRAIN_BENCH_LOCK=$TMP/bench.lock   # outputs, not timings: never wait for a benchmark
LIMIT=$((300 * SLOWDOWN))
for b in serial/serial mpi/mpi; do
  [ -x $b ] || { fail "$b built" "missing (make all)"; finish; }
done
# the sweep's default strategy is mpi allreduce at P = C
command -v mpirun >/dev/null || { skip "the tta sweep" "mpirun missing (apt-get install openmpi-bin)"; finish; }

# ---- the step in --smoke
R=$TMP/ra
timeout $LIMIT ./run_all.sh --smoke --only tta --no-setup --cores 2 --results "$R" >"$TMP/ra.out" 2>&1
rc=$?
check "run_all --smoke --only tta: exit 0" "exit $rc: $(tail -n 5 "$TMP/ra.out")" [ $rc = 0 ]
rows=$("$PARTRAIN_PYTHON" - "$R/tta.csv" <<'EOF' 2>&1
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(r["program"], r["variant"], r["ranks"], r["batch"], r["seed"], r["target_accuracy"],
          r["epochs_to_target"] or "-", "disturbed" in r)
EOF
)
want="serial own-gemm 1 32 1 60 2 True
mpi allreduce 2 32 1 60 2 True
serial own-gemm 1 512 1 60 - True
mpi allreduce 2 512 1 60 - True"
check "tta.csv: serial and mpi allreduce P=2 at batch 32 (reached at epoch 2) and 512 (not reached), seed 1, target 60" \
  "$rows" [ "$rows" = "$want" ]
check "tta-best.txt: the default strategy and why (no bench CSVs)" "$(cat "$R/tta-best.txt" 2>&1)" \
  grep -q $'^mpi allreduce P=2\tno bench-openmp.csv.*the default\t3$' "$R/tta-best.txt"
if command -v gnuplot >/dev/null; then
  check "the plots step draws tta.png" "$(grep tta "$R/logs/plots.log" 2>&1)" [ -s "$R/tta.png" ]
else
  skip "tta.png" "gnuplot missing"
fi
sect=$(sed -n '/^## Time to accuracy/,/^## /p' "$R/REPORT.md" 2>/dev/null)
check "REPORT.md has the section with both batches and the strategy's equal epochs" "$sect" \
  grep -q '^| 512 | 0.24 | not reached (3 epochs) |' <<<"$sect"
check "... and says the strategy needed serial's epochs in 2 of 2 pairs" "$sect" \
  grep -q "needed serial's epochs to target in 2 of 2 (batch, seed) pairs, as its equal maths says" <<<"$sect"

# ---- the strategy from a bench CSV (by column name)
mkdir -p "$TMP/b"
"$PARTRAIN_PYTHON" - "$R/tta.csv" "$TMP/b/bench-mpi.csv" <<'EOF'
import csv, sys
base = next(csv.DictReader(open(sys.argv[1])))
w = csv.DictWriter(open(sys.argv[2], "w", newline=""), list(base.keys()))
w.writeheader()
for prog, var, ranks, threads, sec in (("serial", "own-gemm", 1, 1, 2.0), ("mpi", "allreduce", 2, 1, 1.25),
                                       ("mpi", "shm", 2, 1, 1.1), ("openmp", "reduction", 1, 2, 1.0),
                                       ("openmp", "loop", 1, 1, 0.5)):
    w.writerow(dict(base, program=prog, variant=var, ranks=ranks, threads=threads, epoch_seconds_median=sec, batch=64))
EOF
got=$("$PARTRAIN_PYTHON" scripts/tta_sweep.py best --results "$TMP/b" --cores 2 2>&1)
check "best at C = 2 from bench-mpi.csv: openmp reduction T=2 (2.00x; the 1-thread row is not a candidate)" "$got" \
  grep -q $'^openmp\treduction\t1\t2\tfastest per epoch at 2 workers in bench-mpi.csv: 2.00x serial' <<<"$got"
got=$("$PARTRAIN_PYTHON" scripts/tta_sweep.py best --results "$TMP/b" --cores 4 2>&1)
check "best at C = 4 (no 4-worker rows): mpi allreduce P = 4, said so" "$got" grep -q $'^mpi\tallreduce\t4\t1\tno ' <<<"$got"

# ---- bad input, the memory's limit
expect_error "--batches 0 is refused" "batches" bench/tta-sweep.sh --smoke --batches 0 --results "$TMP/e"
expect_error "--target 101 is refused" "target" bench/tta-sweep.sh --smoke --target 101 --results "$TMP/e"
rm -f "$TMP/err.csv"
PARTRAIN_MEM_AVAILABLE=1M timeout $LIMIT bench/tta-sweep.sh --smoke --cores 2 --results "$TMP/m" >"$TMP/m.out" 2>"$TMP/m.err"
rc=$?
check "every batch refused by the memory check: exit 2, one line, no tta.csv or tta-best.txt" \
  "exit $rc: $(cat "$TMP/m.err")" [ $rc = 2 -a "$(grep -c . "$TMP/m.err")" = 1 -a ! -e "$TMP/m/tta.csv" -a ! -e "$TMP/m/tta-best.txt" ]
grep -q 'no batch of .* fits the memory' "$TMP/m.err" || fail "the memory line names the problem" "$(cat "$TMP/m.err")"

# ---- a run whose loss diverges: not fatal, recorded in tta-diverged.txt, "diverged" in the
# report (Fashion-MNIST 10k at batch 4096, rate 1.92: both sides diverge at epoch 6, seed 1)
D=$TMP/d; mkdir -p "$D"
timeout $LIMIT bench/tta-sweep.sh --quick --batches 4096 --test 500 --cores 2 --results "$D" >"$TMP/d.out" 2>&1
rc=$?
got=$(cut -f1,3,4,5,6,7 "$D/tta-diverged.txt" 2>&1 | tr '\t' ' ' | paste -sd' ')
check "diverging runs: exit 0, both in tta-diverged.txt (batch 4096, seed 1, rate 1.92, cap 6, epoch 6), no row" \
  "exit $rc: $got; $(tail -n 3 "$TMP/d.out")" \
  [ $rc = 0 -a "$got" = "side batch seed lr cap epoch serial 4096 1 1.92 6 6 best 4096 1 1.92 6 6" -a ! -s "$D/tta.csv" ]
cp tests/fixtures/tta.csv "$D/"   # beside the fixture's rows, batch 4096 is diverged on both sides
"$PARTRAIN_PYTHON" scripts/report.py --results "$D" --plots "$D" --out "$D/REPORT.md" >/dev/null 2>&1
check "the report: batch 4,096 'diverged (epoch 6)' on both sides, counted as not reached (0/1)" \
  "$(grep -F '| 4,096 |' "$D/REPORT.md")" grep -qF '| 4,096 | 1.92 | diverged (epoch 6) | diverged (epoch 6) | diverged (epoch 6) | diverged (epoch 6) | 0/1 / 0/1 |' "$D/REPORT.md"

# ---- the report section and the figure's data from the fixture
F=$TMP/f; mkdir -p "$F"
cp tests/fixtures/tta.csv "$F/"
printf 'mpi allreduce P=2\tthe fixture\t8\n' >"$F/tta-best.txt"
"$PARTRAIN_PYTHON" scripts/report.py --results "$F" --plots "$F" --out "$F/REPORT.md" >/dev/null 2>"$TMP/rep.err"
sect=$(sed -n '/^## Time to accuracy/,/^## /p' "$F/REPORT.md")
check "fixture: batch 1,024 not reached by serial, 2/3 by best" "$sect" \
  grep -q '^| 1,024 | 0.48 | not reached (8 epochs) | not reached (8 epochs) | 8 | 6.3 \[6.2–6.5\] | 0/3 / 2/3 |' <<<"$sect"
check "fixture: the table has at most 7 columns" "$sect" \
  [ "$(grep -m 1 '^| batch' <<<"$sect" | tr -cd '|' | wc -c)" -le 8 ]
check "fixture: serial's seconds stop falling at batch 128, the strategy's at 256" "$sect" \
  grep -q 'For serial, seconds to target stop falling at batch 128 .*For mpi allreduce P=2, seconds to target stop falling at batch 256' <<<"$sect"
check "fixture: epochs grow with the batch; 16 of 18 pairs equal" "$sect" \
  grep -q 'Epochs to target grow with the batch.*in 16 of 18 (batch, seed) pairs' <<<"$sect"
no_failure() { ! grep -q 'Traceback\|section tta' "$TMP/rep.err"; }
check "fixture: no traceback, no section failure" "$(cat "$TMP/rep.err")" no_failure
"$PARTRAIN_PYTHON" scripts/tta_sweep.py dat "$F/tta.csv" "$F/tta.dat" >/dev/null
line=$(awk '$1 == 1024' "$F/tta.dat")
if command -v gnuplot >/dev/null; then
  out=$(scripts/plot.sh --results "$F" --plots "$F" --only tta 2>&1)
  check "the fixture's figure is drawn" "$out" [ -s "$F/tta.png" ]
fi
check "tta.dat: serial at 1024 (not reached) has no epochs, its cap 8 and run time 16 s (the marker), never 0" "$line" \
  [ "$(cut -d' ' -f2,5,8,9,22 <<<"$line")" = "? ? 8 16.0000 8" ]

# ---- stops falling, grows: known answers
got=$("$PARTRAIN_PYTHON" - <<'EOF'
import sys
sys.path.insert(0, "scripts")
import tta_sweep as t
print(t.stops_falling([(32, 20.0), (64, 10.0), (128, 9.5), (256, 12.0)]))   # within 10 % of 9.5: 64
print(t.stops_falling([(32, 9.0), (64, 10.0), (128, None)]))                 # the smallest already the minimum
print(t.stops_falling([(32, None), (64, None)]))
print(t.stops_falling([(256, 5.0), (32, 20.0), (64, 12.0), (128, 5.4)]))     # unsorted input; 5.4 within 10 % of 5.0
print(t.grows([(32, 3), (64, 3), (128, 5)]), t.grows([(32, 5), (64, 4)]), t.grows([(32, 3), (64, 5), (128, 4)]),
      t.grows([(32, 3), (64, None)]))
EOF
)
want="(64, 128, 9.5)
(32, 32, 9.0)
None
(128, 256, 5.0)
yes no not monotonic None"
check "stops_falling and grows: the known answers" "$got" [ "$got" = "$want" ]
finish
