#!/usr/bin/env bash
# tests/test_report_links.sh — the report's first page, --compare, and its links.
#
#   1. Every image and link of every committed REPORT.md under results/ (results/reference/
#      among them when present) resolves relative to the report's directory, and no
#      committed REPORT.md or README.md names an absolute path of a machine (/work/, /tmp/,
#      /home/, /root/): tests/check_links.py. results/reference/ (what git would commit)
#      stays <= 3 MB.
#   2. The first page renders from a fixture results directory (two sweeps, PyTorch rows,
#      a machine.json) without tta.csv ("not measured") and with it (its seconds); the best
#      configuration's speedup and its PyTorch ratio are the fixture's numbers; the title
#      names one run, or "assembled from 2 runs" when the rows are days apart; the
#      fixture report's links resolve.
#   3. --compare on two fixture directories (the reference twice as slow): ratio 0.50 for
#      each configuration both have, in the report and in DIR/compare.csv; the configuration
#      only one side has is counted, not listed; a missing REFDIR or one without CSVs: one
#      line, exit 2, nothing written.
# The --smoke run's report and machine.json are checked in tests/test_run_all.sh (it makes
# one). No trainer runs; no timing is asserted.
set -u
cd "$(dirname "$0")/.." || exit 2
. tests/lib.sh
. scripts/lib.sh    # PARTRAIN_PYTHON
[ -x "$PY" ] || PY=python3
command -v "$PY" >/dev/null || { skip report-links "python3 missing"; exit 0; }

# ---------------------------------------------------------------- 1. committed reports
reports=$(git ls-files 'results/*REPORT.md' 'results/**/REPORT.md' 2>/dev/null | sort -u)
[ -f results/reference/REPORT.md ] && reports=$(printf '%s\nresults/reference/REPORT.md\n' "$reports" | sort -u)
if [ -n "$reports" ]; then
  # shellcheck disable=SC2086  # one path per word
  out=$("$PY" tests/check_links.py --no-abs $reports 2>&1)
  check "every image and link of $(wc -w <<<"$reports") committed REPORT.md resolves; no absolute path" "$(head -n 5 <<<"$out")" [ -z "$out" ]
else
  skip "committed REPORT.md links" "no REPORT.md under results/ is committed (results/reference/ not made yet)"
fi
readmes=$(git ls-files 'README.md' '*/README.md' 2>/dev/null)
# shellcheck disable=SC2086
out=$("$PY" tests/check_links.py --no-abs $readmes 2>&1 | grep 'an absolute path')
check "no committed README.md names an absolute path of a machine" "$(head -n 3 <<<"$out")" [ -z "$out" ]
if [ -d results/reference ]; then
  bytes=$(git ls-files -co --exclude-standard -z results/reference | xargs -0 -r stat -c %s -- 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
  check "results/reference/ as committed: $bytes bytes <= 3 MB" "$bytes bytes" [ "$bytes" -le 3145728 ]
else
  skip "results/reference/ size" "results/reference/ missing"
fi

# ---------------------------------------------------------------- 2. fixtures
header=$("$PY" -c 'import sys; sys.path.insert(0, "scripts"); import partrain; print(",".join(partrain.results_header()))')
# fixture DIR SCALE STAMP2 EXTRA: a results directory; every epoch time x SCALE; the mpi
# rows stamped STAMP2; EXTRA: a configuration only this directory has (openmp T = EXTRA)
fixture() {
  mkdir -p "$1"
  HEADER=$header "$PY" - "$@" <<'PYEOF'
import csv, json, os, sys
d, scale, stamp2, extra = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
cols = os.environ["HEADER"].split(",")
n = [0]
def row(program, variant, ranks, threads, epoch, stamp="2026-01-01T00:00:00Z", **more):
    n[0] += 1
    r = dict(run_id=f"fx-{n[0]}", program=program, variant=variant, ranks=ranks, threads=threads,
             omp_wait_policy="", dataset="fashion", image_size=28, train_n=60000, test_n=10000, hidden="256x128",
             activation="relu", batch=64, epochs=3, lr=0.01, lr_schedule="none", seed=42, target_accuracy="",
             epochs_to_target="", seconds_to_target="", epoch_seconds_median=epoch * scale,
             total_seconds=3 * epoch * scale, comm_seconds=0, sync_seconds=0, samples_per_second=1, gflops=1,
             final_train_loss=0.4, test_accuracy=85, train_loss_curve="0.5;0.4;0.4", test_acc_curve="80;84;85",
             epoch_seconds=";".join([str(epoch * scale)] * 3), host="fixture", timestamp=stamp)
    r.update(more)
    return [str(r[c]) for c in cols]
def write(name, rows):
    with open(os.path.join(d, name), "w", newline="") as f:
        w = csv.writer(f); w.writerow(cols); w.writerows(rows)
write("openmp.csv", [row("serial", "own-gemm", 1, 1, 1.0), row("openmp", "reduction", 1, 1, 1.1),
                     row("openmp", "reduction", 1, 2, 0.5), row("openmp", "reduction", 1, 2, 0.5),
                     row("openmp", "reduction", 1, extra, 0.8)])
write("mpi-strong.csv", [row("serial", "own-gemm", 1, 1, 1.0, stamp2), row("mpi", "allreduce", 2, 1, 0.625, stamp2)])
write("bench-serial.csv", [row("serial", "own-gemm", 1, 1, 1.0), row("pytorch", "torch-2", 1, 1, 1.5)])
json.dump({"cores": 2, "nodes": 1, "slots": 2, "cores_from": "fixture", "real_cores": 2, "cpu_model": "Fixture CPU",
           "cpu_family_model_stepping": "1/2/3", "real_cores_online": 2, "memory_gib": 4.0,
           "compiler": "cc (Fixture) 1.0", "kernel": "Linux fixture", "date": "2026-01-01 00:00 UTC",
           "c2c_latency_ns": 123.0}, open(os.path.join(d, "machine.json"), "w"))
PYEOF
}
A=$TMP/a B=$TMP/b
fixture "$A" 1 2026-01-01T01:00:00Z 4
fixture "$B" 2 2026-01-03T00:00:00Z 8
"$PY" scripts/report.py --results "$A" --plots "$A" >/dev/null 2>"$TMP/a.err"; rc=$?
R=$A/REPORT.md
check "first page without tta.csv: exit 0, no traceback" "exit $rc: $(head -n 3 "$TMP/a.err")" \
  bash -c "[ $rc = 0 ] && ! grep -q Traceback '$TMP/a.err'"
check "title: one run, its date" "$(head -n 1 "$R")" grep -qx '# partrain report: the run of 2026-01-01 00:00 … 01:00 UTC' "$R"
check "first page right after the title paragraph, before the machine table" "$(grep -n '^## ' "$R" | head -n 2)" \
  bash -c "[ \"\$(grep '^## ' '$R' | head -n 2 | paste -sd'|')\" = '## The answer on one page|## Machine' ]"
check "the machine in one line from machine.json" "$(grep -F '**Machine:**' "$R")" \
  grep -qF '**Machine:** Fixture CPU (family/model/stepping 1/2/3), 2 CPUs, 4.0 GiB, cc 1.0, 2026-01-01 00:00 UTC' "$R"
row=$(grep -E '^\| openmp \|' "$R")
check "best openmp: T = 2, 1.0 / 0.5 = 2.00×, PyTorch 1.5 / 0.5 = 3.00×, seconds to target not measured" "row: $row" \
  grep -qxF '| openmp | --accum reduction, T = 2, batch 64 | 2.00× | not measured | 3.00× | not measured |' <<<"$row"
row=$(grep -E '^\| mpi \|' "$R")
check "best mpi: P = 2, 1.0 / 0.625 = 1.60×" "row: $row" grep -qF '| --sync allreduce, P = 2, batch 64 | 1.60× |' <<<"$row"
check "tta.csv missing: said once" "$(grep -c 'tta.csv' "$R")" grep -qF 'not measured in this run (`tta.csv` missing)' "$R"
n=$(sed -n '/^### Findings/,/^## /p' "$R" | grep -cE '^[0-9]+\. ')
check "findings: 1..10 numbered sentences ($n)" "$n" [ "$n" -ge 1 -a "$n" -le 10 ]
check "findings: the fastest strategy, computed (openmp, 2.00×)" "$(sed -n '/^### Findings/,/^## /p' "$R")" \
  grep -qF 'The fastest strategy is openmp (--accum reduction, T = 2): 2.00× serial' "$R"
check "findings: the core-to-core latency of machine.json (123 ns)" "$(grep -F 'round trip' "$R")" grep -qF 'takes 123 ns' "$R"
out=$("$PY" tests/check_links.py "$R")
check "fixture report: every link and in-page anchor resolves" "$out" [ -z "$out" ]

HEADER=$header "$PY" - "$A" <<'PYEOF'
import csv, os, sys
cols = os.environ["HEADER"].split(",")
with open(os.path.join(sys.argv[1], "openmp.csv")) as f:
    r = dict(next(iter(csv.DictReader(f))))
rows = []
for prog, var, th, epoch, secs in (("serial", "own-gemm", 1, 1.0, 40.0), ("openmp", "reduction", 2, 0.5, 12.0),
                                   ("openmp", "reduction", 2, 0.5, 14.0)):
    x = dict(r, program=prog, variant=var, threads=th, epoch_seconds_median=epoch, target_accuracy=84,
             epochs_to_target=2, seconds_to_target=secs)
    rows.append([x[c] for c in cols])
with open(os.path.join(sys.argv[1], "tta.csv"), "w", newline="") as f:
    w = csv.writer(f); w.writerow(cols); w.writerows(rows)
PYEOF
"$PY" scripts/report.py --results "$A" --plots "$A" >/dev/null 2>"$TMP/a.err"; rc=$?
row=$(grep -E '^\| openmp \|' "$R")
check "first page with tta.csv: exit 0; openmp's seconds to target 13.0 s (median of 12, 14)" "exit $rc, row: $row" \
  bash -c "[ $rc = 0 ] && grep -qF '| 13.0 s (≥ 84%, batch 64) |' <<<'$row'"
check "with tta.csv: no 'tta.csv missing'" "$(grep -F 'tta.csv' "$R")" bash -c "! grep -qF '(\`tta.csv\` missing)' '$R'"

"$PY" scripts/report.py --results "$B" --plots "$B" >/dev/null 2>&1
check "rows two days apart: 'assembled from 2 runs' and the list" "$(sed -n 1,6p "$B/REPORT.md")" \
  bash -c "head -n 1 '$B/REPORT.md' | grep -qF 'assembled from 2 runs' && grep -qE '^- 2026-01-03 00:00 UTC: mpi-strong.csv$' '$B/REPORT.md'"

# ---------------------------------------------------------------- 3. --compare
"$PY" scripts/report.py --results "$A" --plots "$A" --compare "$B" >/dev/null 2>"$TMP/c.err"; rc=$?
check "--compare: exit 0" "exit $rc: $(head -n 3 "$TMP/c.err")" [ $rc = 0 ]
sec=$(sed -n '/^### Against the reference/,/^### Findings/p' "$R")
check "--compare: its section on the first page, after the best-configuration table" "$(grep -n '^##' "$R" | head -n 5)" \
  bash -c "grep '^##' '$R' | head -n 4 | paste -sd'|' | grep -qF '### The best configuration per strategy|### Against the reference|### Findings'"
check "--compare: every shared configuration at here / reference = 0.50" "$sec" \
  bash -c "grep -qF 'median 0.50, from 0.50 to 0.50 over 5 configurations' <<<'$sec'"
check "--compare: the configuration only one side has is counted, not listed" "$sec" \
  bash -c "grep -qF '1 configuration(s) only this run has and 1 only the reference has' <<<'$sec' && ! grep -qE '^\| openmp reduction \| 1 × (4|8) \|' <<<'$sec'"
check "--compare: both machines' lines" "$sec" bash -c "[ \$(grep -o 'Fixture CPU' <<<'$sec' | wc -l) = 2 ]"
csvrows=$(awk -F, 'NR > 1 { printf "%s %s %s %s %s\n", $1, $3, $4, $9, $10 }' "$A/compare.csv" | sort | paste -sd'|')
check "--compare: compare.csv has the 5 shared configurations, 0.5000 each" "$csvrows" \
  [ "$csvrows" = "mpi 2 1 0.625 1.25|openmp 1 1 1.1 2.2|openmp 1 2 0.5 1|pytorch 1 1 1.5 3|serial 1 1 1 2" ]
check "--compare: ratios in compare.csv" "$(cut -d, -f11 "$A/compare.csv" | sort -u | paste -sd' ')" \
  [ "$(cut -d, -f11 "$A/compare.csv" | sed 1d | sort -u)" = 0.5000 ]
cp "$R" "$TMP/before.md"
for bad in "$TMP/nowhere" "$TMP/empty"; do
  mkdir -p "$TMP/empty"
  "$PY" scripts/report.py --results "$A" --plots "$A" --compare "$bad" >"$TMP/o" 2>"$TMP/e"; rc=$?
  check "--compare ${bad##*/}: exit 2, one line, nothing written" "exit $rc: $(cat "$TMP/e")" \
    bash -c "[ $rc = 2 ] && [ \$(wc -l <'$TMP/e') = 1 ] && cmp -s '$R' '$TMP/before.md'"
done
finish
