#!/usr/bin/env bash
# tests/test_report.sh — scripts/report.py on a small fixture results directory.
#
# The fixture: CSV rows with the real header of common/results.h (read from the file by
# scripts/partrain.py, so a schema change reaches this test), a hyperfine JSON, a
# skipped.txt and a valid 1x1 PNG; its openmp rows have every --accum mode that
# openmp/openmp --list-variants names. Checks: every required heading; known numbers in
# the right table rows; the modes in openmp/openmp's own order; the "not measured in this
# run" line (with skipped.txt's reason) for inputs that are absent or removed; that
# different numbers give a different "What this shows" sentence; every run_all.sh step id
# report.py names is one `./run_all.sh --list-steps` prints; no Python traceback; an empty
# results directory still gives a complete report; rows that scripts/lib.sh marked disturbed
# (its two extra columns) are counted in their runs cells and said once at the top, and
# rows without those columns are not. Issue 33: no table wider than 7 columns (fixture and
# empty directory), every link and image resolving relative to REPORT.md (none absolute),
# the wide tables' CSVs in DIR/report-tables/ (not among the result CSVs); the spread cells
# of 3 runs (median (min–max)) and of 5 bench rounds (MLPerf's trimmed mean, the kept
# range, a speedup with the range of its per-round ratios), the rule said once; a report
# that cannot be written: exit 2, one line.
# No timings are asserted; no trainer runs (the programs only list their variants).
set -u
cd "$(dirname "$0")/.." || exit 2
. tests/lib.sh
. scripts/lib.sh    # PARTRAIN_PYTHON, variant_names

[ -x "$PY" ] || PY=python3
command -v "$PY" >/dev/null || { skip report "python3 missing"; exit 0; }

D=$TMP/res P=$TMP/plots
mkdir -p "$D" "$P"
header=$("$PY" -c 'import sys; sys.path.insert(0, "scripts"); import partrain; print(",".join(partrain.results_header()))')
check "fixture: header read from common/results.h" "got '$header'" [ "${header%%,*}" = run_id ]
modes=$(variant_names openmp/openmp 2>/dev/null | paste -sd,)
[ -n "$modes" ] || modes=loop   # openmp/openmp not built: one mode; the order check below is skipped

# make_fixture MPI_EPOCH MPI_COMM: writes the fixture's CSVs (bench-mpi's P = 2 row takes the arguments)
make_fixture() {
  HEADER=$header MODES=$modes "$PY" - "$D" "$1" "$2" <<'EOF'
import csv, os, sys
d, mpi_epoch, mpi_comm = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
modes = os.environ["MODES"].split(",")
cols = os.environ["HEADER"].split(",")
n = [0]
def row(program, variant, ranks, threads, epoch, comm=0.0, sync=0.0, batch=64, train=60000, policy="",
        image=28, acc=85.0, epochs=4):
    n[0] += 1
    r = dict(run_id=f"fx-{n[0]}", program=program, variant=variant, ranks=ranks, threads=threads,
             omp_wait_policy=policy, dataset="fashion", image_size=image, train_n=train, test_n=10000,
             hidden="256x128", activation="relu", batch=batch, epochs=epochs, lr=0.01, lr_schedule="none", seed=42,
             target_accuracy="", epochs_to_target="", seconds_to_target="",
             epoch_seconds_median=epoch, total_seconds=epoch * epochs * 1.1, comm_seconds=comm,
             sync_seconds=sync, samples_per_second=train / epoch, gflops=60.0, final_train_loss=0.4,
             test_accuracy=acc, train_loss_curve=";".join(["0.6", "0.5", "0.45", "0.4"][:epochs]),
             test_acc_curve=";".join(["80", "82", "84", str(acc)][:epochs]),
             epoch_seconds=";".join([str(epoch)] * epochs), host="fixture",
             timestamp=f"2026-01-01T00:00:{n[0]:02d}Z")
    return [str(r[c]) for c in cols]
def write(name, rows):
    with open(os.path.join(d, name), "w", newline="") as f:
        w = csv.writer(f); w.writerow(cols); w.writerows(rows)
write("bench-mpi.csv", [row("serial", "own-gemm", 1, 1, 0.8, batch=512), row("serial", "own-gemm", 1, 1, 0.8, batch=512),
                        row("mpi", "allreduce", 2, 1, mpi_epoch, comm=mpi_comm, batch=512)])
# every mode, in reverse order, the last one the fastest: 0.71, 0.5, 0.55, 0.9 s at T = 1, 2, 4, 8
write("openmp.csv", [row("serial", "own-gemm", 1, 1, 0.7)] +
      [row("openmp", m, 1, t, e + 0.01 * k, policy="passive" if t > 2 else "")
       for k, m in enumerate(reversed(modes)) for t, e in ((1, 0.71), (2, 0.5), (4, 0.55), (8, 0.9))])
# allreduce at P = 2 has 3 runs: 0.44, 0.40, 0.50 s (median 0.44 s, range 0.40-0.50 s)
write("mpi-strong.csv", [row("serial", "own-gemm", 1, 1, 0.8, batch=512)] +
      [row("mpi", v, p, 1, 0.8 / p * 1.1 if p <= 2 else 0.9, comm=0.01 * p, batch=512) for v in ("allreduce", "overlap")
       for p in (1, 2, 4)] +
      [row("mpi", "allreduce", 2, 1, e, comm=0.02, batch=512) for e in (0.40, 0.50)])
write("mpi-pipeline.csv", [row("pipeline", f"gpipe-m{m}", p, 1, 0.3, sync=0.3 * p * 0.4, batch=512)
                           for p in (1, 2) for m in (1, 4)])
# 5 bench rounds (serial, then PyTorch): MLPerf's rule drops each one's fastest and slowest run:
# serial 0.600 s (0.580-0.620 s), PyTorch 1.50 s (1.40-1.60 s); the per-round ratios 0.40, 0.44,
# 0.36, 0.35, 0.50 keep 0.36-0.44 around the ratio of the two, 0.40
write("bench-serial.csv", [r for es, et in ((0.60, 1.5), (0.62, 1.4), (0.58, 1.6), (0.70, 2.0), (0.50, 1.0))
                           for r in (row("serial", "own-gemm", 1, 1, es), row("pytorch", "torch-1.13.0a0", 1, 1, et))])
EOF
}
make_fixture 0.4321 0.0200
cat >"$D/hyperfine-serial.json" <<'EOF'
{"results": [{"command": "serial-own-gemm", "mean": 1.2345, "stddev": 0.0456, "median": 1.23, "min": 1.19,
              "max": 1.29, "times": [1.19, 1.23, 1.29], "exit_codes": [0, 0, 0]}]}
EOF
printf 'imagesize\tno time for it in this fixture\ncuda\tno GPU (nvidia-smi missing)\n' >"$D/skipped.txt"
# a valid 1x1 grey PNG
"$PY" -c '
import struct, sys, zlib
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
sys.stdout.buffer.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
                        + chunk(b"IDAT", zlib.compress(b"\x00\x80")) + chunk(b"IEND", b""))' >"$P/openmp-threads.png"

run_report() {   # OUT: runs report.py on the fixture into OUT; stderr in OUT.err
  "$PY" scripts/report.py --results "$D" --plots "$P" --out "$1" >/dev/null 2>"$1.err"
}
# widest_table FILE: the most columns of any markdown table in FILE ('\|' inside a cell is not a border)
widest_table() { LC_ALL=C awk '/^\|/ { l = $0; gsub(/\\\|/, "", l); n = gsub(/\|/, "", l) - 1; if (n > m) m = n } END { print m + 0 }' "$1"; }
# bad_links FILE: every link or image target in FILE that is absolute or does not resolve
# from FILE's directory, an in-page #anchor that is no heading of FILE (tests/check_links.py)
bad_links() { "$PY" tests/check_links.py --no-abs "$1" 2>&1; }
# tables_ok NAME FILE: no table wider than 7 columns, every linked file there
tables_ok() {
  local w; w=$(widest_table "$2")
  check "$1: no table wider than 7 columns" "widest: $w columns: $(grep '^|' "$2" | awk -F'|' 'NF > 9' | head -n 2)" [ "$w" -le 7 ]
  check "$1: every link and image resolves relative to REPORT.md, none absolute" "$(bad_links "$2" | head -n 3)" \
    [ -z "$(bad_links "$2")" ]
}
R=$D/REPORT.md
run_report "$R"; rc=$?
check "report.py exits 0 on the fixture" "exit status $rc: $(tail -n 3 "$R.err")" [ $rc = 0 ]
check "REPORT.md written" "no $R" [ -s "$R" ]
check "no Python traceback on stderr" "$(grep -m1 -A3 Traceback "$R.err")" bash -c "! grep -q Traceback '$R.err'"
check "every step id report.py names is registered by run_all.sh (--list-steps)" "$(grep -F 'step id' "$R.err")" \
  bash -c "! grep -qF 'step id' '$R.err' && ! grep -qF 'cannot check the step ids' '$R.err'"
for h in "## The answer on one page" "## Machine" "## Seed report 000" "## Seed report 001" "## Seed report 002" \
         "## Seed report 003" "## Seed report 004" "## Scaling" "## MPI+MPI vs MPI+OpenMP" "## Timelines" \
         "## Performance model" "## Time to accuracy" "## What else would you use" "## Skipped" \
         "## Which timing is which"; do
  check "heading '$h'" "missing in $R" grep -qxF "$h" "$R"
done
check "title: the run's date (one run)" "$(head -n 1 "$R")" grep -qx '# partrain report: the run of 2026-01-01 00:00 UTC' "$R"
# headings in the required order
order=$(grep -E '^#{1,2} ' "$R" | grep -vE '^## (Seed report 00[0-4]|Machine|Scaling|MPI\+MPI vs MPI\+OpenMP|Timelines|Performance model|Time to accuracy|What else would you use|Skipped|Which timing is which|The answer on one page)$|^# partrain report: ' | head -n 1)
check "no unexpected top-level heading" "found '$order'" [ -z "$order" ]

# known numbers in the right tables
row=$(grep -F '| 512 | Naive + MPI |' "$R")
check "seed 000 Table 1: the mpi P=2 epoch (0.4321 s) in the Naive + MPI row" "row: $row" grep -qF '| 0.432 s |' <<<"$row"
check "seed 000 Table 1: the report's 2.93 s and 0.37 s in one seed cell beside ours" "row: $row" \
  grep -qF '| 2.93 s / 0.370 s |' <<<"$row"
T1=$D/report-tables/seed000-table1.csv
row=$(grep -F 'Naive + MPI' "$T1" 2>/dev/null)
check "seed 000 Table 1: its comm_seconds (0.0200 s) in the all-columns CSV" "row: $row" grep -qF ',0.020 s,' <<<"$row"
check "seed 000 Table 1: the report links that CSV relative to REPORT.md" "$(grep -F seed000-table1 "$R")" \
  grep -qxF 'all columns: [report-tables/seed000-table1.csv](report-tables/seed000-table1.csv)' "$R"
row=$(grep -E '^\| 8 \|' "$R" | head -n 1)
check "Figure 6 table: T = 8 row with 0.900 s, 0.78× serial" "row: $row" grep -qF '0.900 s, 0.78×' <<<"$row"
row=$(grep -E '^8,' "$D/report-tables/seed000-figure6.csv" 2>/dev/null; grep -E '^\| 8 \|' "$R" | head -n 1)
check "Figure 6: T = 8 ran with OMP_WAIT_POLICY passive (in the table or its CSV)" "row: $row" grep -qE '(^8,|\| )passive' <<<"$row"
if [ "$modes" != loop ]; then
  want=$(variant_table openmp/openmp | cut -f2 | paste -sd,)
  got=$(grep -F '| threads |' "$R" | grep -o -- '--accum [a-z-]*' | paste -sd,)
  check "Figure 6 table: one column per --accum mode, in openmp/openmp --list-variants order" \
    "want '$want', got '$got'" [ "$want" = "$got" ]
else
  skip "Figure 6 table: mode order" "openmp/openmp does not list its variants (make all)"
fi
row=$(grep -E '^\| allreduce \| 2 \|' "$R" | head -n 1)
check "strong scaling: allreduce P = 2 speedup 0.8 / 0.44 = 1.82×" "row: $row" grep -qF '1.82×' <<<"$row"
check "spread, 3 runs: the median with the min–max (0.440 s (0.400–0.500 s)); a sweep's speedup has no range" \
  "row: $row" grep -qF '| 0.440 s (0.400–0.500 s) | 1.82× |' <<<"$row"
row=$(grep -E '^\| 2 \| 4 \|' "$R")
check "pipeline: P = 2, M = 4 measured bubble 40% beside theory 20%" "row: $row" grep -qE '\| 40% \| 20% \|' <<<"$row"
row=$(grep -F 'serial-own-gemm' "$R" | grep -F 'hyperfine-serial.json')
check "hyperfine table: mean ± sd, min, runs" "row: $row" grep -qF '| 3 | 1.23 s ± 0.046 s | 1.19 s |' <<<"$row"
row=$(grep -F '| MLP | 64 | serial --gemm own |' "$R")
check "PyTorch section: serial 0.6 s vs PyTorch 1.5 s = 0.40×" "row: $row" grep -qF '0.40×' <<<"$row"
check "spread, 5 runs: MLPerf's rule (mean of the 3 kept, their range) for both, the per-round ratios' kept range" \
  "row: $row" grep -qF '| 0.600 s (0.580–0.620 s) | 1.50 s (1.40–1.60 s), 1 thread | 0.40× (0.36–0.44×) |' <<<"$row"
check "the timing section says the rule once, with how many configurations follow it" \
  "$(grep -F 'Repeated runs' "$R")" \
  grep -qF "2 configurations had at least 5 runs (MLPerf's rule)" "$R"
check "figure embedded with a path relative to REPORT.md" "$(grep -F 'openmp-threads' "$R")" \
  grep -qF '](../plots/openmp-threads.png)' "$R"

# missing inputs: one line each, with skipped.txt's reason when it has one
check "missing imagesize.csv: the line with skipped.txt's reason" "$(grep -F imagesize.csv "$R")" \
  grep -qF "not measured in this run: imagesize.csv missing (step imagesize skipped: no time for it in this fixture)" "$R"
check "missing PNG: a line, not a broken image link" "$(grep -F curves.png "$R")" \
  grep -qF "not measured in this run: ../plots/curves.png missing" "$R"
check "no image link to a missing PNG" "$(grep -F '![' "$R" | grep -v openmp-threads)" \
  bash -c "! grep -F '![' '$R' | grep -vq openmp-threads"
bt='`'
check "Skipped section lists skipped.txt's lines" "$(sed -n '/^## Skipped/,/^## /p' "$R")" \
  grep -qF -- "- ${bt}cuda${bt}: no GPU (nvidia-smi missing)" "$R"
tables_ok "fixture" "$R"
check "fixture: wide tables linked their CSVs (>= 5 'all columns:' lines)" "$(grep -c '^all columns: ' "$R")" \
  [ "$(grep -c '^all columns: \[report-tables/' "$R")" -ge 5 ]
# shellcheck disable=SC2317  # called through check
not_results() { for f in "$D"/*.csv; do [ "$(head -c 7 "$f")" = run_id, ] || echo "$f"; done; }
check "fixture: the table CSVs are not among the result CSVs (every DIR/*.csv is one)" "$(not_results)" \
  [ -z "$(not_results)" ]
n=$(grep -c '^\*\*What this shows:\*\* ' "$R")
check "a 'What this shows' paragraph in the sections with numbers (>= 6, got $n)" "$n" [ "$n" -ge 6 ]

# rows that scripts/lib.sh marked disturbed: a count in their runs cell, one sentence at the top;
# none without the two columns
check "no disturbed rows: no mention of them" "$(grep -m 2 disturbed "$R")" bash -c "! grep -q disturbed '$R'"
D2=$TMP/res-disturbed
cp -r "$D" "$D2"
awk -F, '{ sub(/\r$/, "") } NR == 1 { print $0 ",other_load_cores,disturbed"; next } { print $0 "," (NR == 2 ? "0.900,1" : "0.010,0") }' \
  "$D/bench-mpi.csv" >"$D2/bench-mpi.csv"
"$PY" scripts/report.py --results "$D2" --plots "$P" --out "$D2/REPORT.md" >/dev/null 2>"$D2/err"; rc=$?
row=$(grep -F '| 512 | Naive (no OpenMP or CUDA) |' "$D2/REPORT.md")
check "a disturbed serial row: exit 0, its runs cell '2 (1 disturbed)'" "exit $rc, row: $row" \
  eval '[ $rc = 0 ] && grep -qF "| 2 (1 disturbed) |" <<<"$row"'
check "a disturbed row: one sentence at the top says so" "$(sed -n 1,8p "$D2/REPORT.md")" \
  eval '[ "$(grep -c "were measured while other processes loaded the machine" "$D2/REPORT.md")" = 1 ] &&
        grep -q "^1 result row of [0-9]* were measured" "$D2/REPORT.md"'

# the first page's fraction of the core bound is the shown configuration's own: another
# variant's bound rounds (openmp owner in bench-mpi-bounds.csv) give "not measured" for the
# best mode (the fixture's last mode at T = 2); its own rounds (bench-openmp-bounds.csv) give
# the median of its speedup / bound, 0.70 of 1.40/2.0, 1.5/2.0, 1.2/1.9, beside its median
# speedup and bound in those rounds
D3=$TMP/res-bounds
cp -r "$D" "$D3"
best=${modes##*,}
printf 'trainer,variant,ranks,threads,batch,round,speedup,bound\nopenmp,owner,1,2,64,1,1.0000,1.3600\n' >"$D3/bench-mpi-bounds.csv"
first_openmp() { "$PY" scripts/report.py --results "$D3" --plots "$P" --out "$D3/REPORT.md" >/dev/null 2>&1; grep -m1 '^| openmp |' "$D3/REPORT.md"; }
row=$(first_openmp)
check "first page: only another variant's bound rounds -> the best mode's fraction is 'not measured'" "row: $row" \
  eval 'grep -qF "| --accum $best, T = 2, batch 64 | 1.40× | not measured |" <<<"$row"'
{ echo trainer,variant,ranks,threads,batch,round,speedup,bound
  printf '%s\n' "openmp,$best,1,2,64,1,1.4000,2.0000" "openmp,$best,1,2,64,2,1.5000,2.0000" "openmp,$best,1,2,64,3,1.2000,1.9000"
} >"$D3/bench-openmp-bounds.csv"
row=$(first_openmp)
check "first page: the best mode's own bound rounds -> 0.70, with their speedup and bound (1.40× of 2.00×)" "row: $row" \
  eval 'grep -qF "| 1.40× | 0.70 (bench rounds: 1.40× of 2.00×) |" <<<"$row"'

# different numbers, different sentence: comm share 0.02/0.4321 = 4.6% vs 0.3/0.9 = 33%
s1=$(grep -o 'At batch 512, 2 MPI ranks give[^.]*\.[^.]*\.[^;]*;[^;]*;' "$R")
check "seed 000: sentence from the numbers (4.6%, smaller share)" "got: $s1" grep -qF '(4.6%), a smaller share than' <<<"$s1"
make_fixture 0.9000 0.3000
run_report "$R"
s2=$(grep -o 'At batch 512, 2 MPI ranks give[^.]*\.[^.]*\.[^;]*;[^;]*;' "$R")
# shellcheck disable=SC2317  # called through check
changed() { [ "$s1" != "$s2" ] && grep -qF '0.89× over serial' <<<"$s2" && grep -qF '(33.3%), a larger share than' <<<"$s2"; }
check "seed 000: changed numbers change the sentence (33.3%, larger share; 0.89× instead of 1.85×)" \
  "before: $s1 / after: $s2" changed

# a removed input: the missing line instead of its table
rm "$D/openmp.csv"
run_report "$R"; rc=$?
check "removed openmp.csv: exit 0" "exit status $rc" [ $rc = 0 ]
check "removed openmp.csv: 'not measured in this run' line" "$(grep -F openmp.csv "$R" | head -n 3)" \
  grep -qF "not measured in this run: openmp.csv missing (step openmp-sweep skipped: no reason in skipped.txt)" "$R"
check "removed openmp.csv: its table is gone" "$(grep -E '^\| 8 \| passive' "$R")" bash -c "! grep -qE '^\| 8 \| passive' '$R'"

# nothing at all: every heading, nothing skipped is claimed, no traceback
E=$TMP/empty
mkdir -p "$E"
"$PY" scripts/report.py --results "$E" --plots "$E" --out "$E/REPORT.md" >/dev/null 2>"$E/err"; rc=$?
check "empty results dir: exit 0" "exit status $rc: $(tail -n 3 "$E/err")" [ $rc = 0 ]
check "empty results dir: all 11 headings" "$(grep -c '^#' "$E/REPORT.md")" \
  bash -c "[ \$(grep -cE '^(# partrain report.*|## (Machine|Seed report 00[0-4]|Scaling|What else would you use|Skipped|Which timing is which))$' '$E/REPORT.md') = 11 ]"
check "empty results dir: no traceback" "$(head -n 5 "$E/err")" bash -c "! grep -q Traceback '$E/err'"
tables_ok "empty results dir" "$E/REPORT.md"
check "empty results dir: says skipped.txt is missing rather than 'nothing was skipped'" "$(sed -n '/^## Skipped/,/^## /p' "$E/REPORT.md")" \
  bash -c "grep -qF 'skipped.txt\` is missing' '$E/REPORT.md' && ! grep -qx 'nothing was skipped' '$E/REPORT.md'"
: >"$E/skipped.txt"
"$PY" scripts/report.py --results "$E" --plots "$E" --out "$E/REPORT.md" >/dev/null 2>&1
check "empty skipped.txt: 'nothing was skipped'" "$(sed -n '/^## Skipped/,/^## /p' "$E/REPORT.md")" grep -qx 'nothing was skipped' "$E/REPORT.md"
"$PY" scripts/report.py --bogus >/dev/null 2>&1; rc=$?
check "usage error: exit 2" "exit status $rc" [ $rc = 2 ]
"$PY" scripts/report.py --results "$D" --plots "$P" --out "$D/skipped.txt/REPORT.md" >/dev/null 2>"$TMP/err"; rc=$?
check "a report that cannot be written: exit 2, one line on stderr naming it" "exit $rc: $(cat "$TMP/err")" \
  eval '[ $rc = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ] && grep -qF "$D/skipped.txt/REPORT.md" "$TMP/err"'
finish
