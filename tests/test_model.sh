#!/usr/bin/env bash
# tests/test_model.sh — scripts/model.py (the textbook alpha-beta model, docs/model.md).
#   - project: ring, recursive doubling and Rabenseifner among 16, 128, 1024 nodes for the
#     MLP's 940,608 bytes at alpha 2 us, 100 Gbit/s within 5 % of the first-principles
#     numbers (issue 31: 201/657/4242, 309/541/772, 157/177/190 us), reduce+bcast exactly 2x
#     recursive doubling, the batch column = E/(1-E) x exchange x N x 64 / per-sample time
#   - every "wins" sentence agrees with the table it was generated from (each node count it
#     names: that algorithm is the smallest of its row; the reduce+bcast ratio range; the
#     hierarchical/flat comparison)
#   - validate on a synthetic comm.csv whose P >= 3 rows are the closed forms written out
#     here (not imported): every held-out row a hit; a row made 2x slow is a miss; a row
#     whose repeats spread 50 % is reported as "spread"; the fit uses only P = 2 rows (a
#     P = 2 row changed changes the predictions; a P = 3 row changed does not change the fit)
#   - bad input: avg_us inf or 1e308, a missing column, a bad option: one line naming the
#     file and row, exit 2
#   - results/reference/model/: `validate` on the committed CSV reproduces the committed table
#   - results/reference/REPORT.md (when made): the model's sentences are model.py project's;
#     the report's Performance model section renders from a results directory
set -u
cd "$(dirname "$0")/.." || exit 2
. tests/lib.sh
. scripts/lib.sh    # PARTRAIN_PYTHON
[ -x "$PY" ] || PY=python3
command -v "$PY" >/dev/null || { skip model "python3 missing"; exit 0; }
M=scripts/model.py

# ---------------------------------------------------------------- the projection
out=$("$PY" $M project --sample-us 4.614 2>&1); rc=$?
check "project: exit 0" "exit $rc: $out" [ $rc = 0 ]
row() { awk -v n="$1" '$1 == n' <<<"$out"; }
for spec in "16 201 309 157" "128 657 541 177" "1024 4242 772 190"; do
  read -r n ring rd rab <<<"$spec"
  got=$(row "$n")
  check "project at $n nodes: ring, rec. doubling, Rabenseifner within 5 % of $ring, $rd, $rab us (got: $got)" "$got" \
    awk -v r="$got" -v a="$ring" -v b="$rd" -v c="$rab" 'BEGIN { split(r, x, " "); e = 0;
      if (!(x[2] > 0.95 * a && x[2] < 1.05 * a)) e = 1; if (!(x[3] > 0.95 * b && x[3] < 1.05 * b)) e = 1;
      if (!(x[4] > 0.95 * c && x[4] < 1.05 * c)) e = 1; exit e }'
  check "project at $n nodes: reduce+bcast is 2x recursive doubling" "$got" \
    awk -v r="$got" 'BEGIN { split(r, x, " "); d = x[5] - 2 * x[3]; exit !(d < 0.2 && d > -0.2) }'
  check "project at $n nodes: the batch columns are 4 x exchange x N x 64 / 4.614 us" "$got" \
    awk -v r="$got" -v n="$n" 'BEGIN { split(r, x, " "); best = x[6] < x[7] ? x[6] : x[7];
      lead = x[2]; if (x[3] < lead) lead = x[3]; if (x[4] < lead) lead = x[4];
      b1 = 4 * best * n * 64 / 4.614; b2 = 4 * lead * n * 64 / 4.614;
      exit !(x[8] > 0.999 * b1 && x[8] < 1.001 * b1 && x[9] > 0.999 * b2 && x[9] < 1.001 * b2) }'
done
# every sentence against the table
bad=$(awk 'NR > 2 && $1 ~ /^[0-9]+$/ { n[$1] = 1; ring[$1] = $2; rd[$1] = $3; rab[$1] = $4; rb[$1] = $5; h[$1] = $6; f[$1] = $7; next }
  /fastest allreduce at/ { a = $0; sub(/^Among one rank per node, /, "", a); sub(/ is the fastest.*/, "", a)
    s = $0; sub(/.* at /, "", s); sub(/ nodes\.$/, "", s); gsub(/,/, "", s); gsub(/ and /, " ", s); m = split(s, ns, " ")
    for (i = 1; i <= m; i++) { k = ns[i]; t["ring"] = ring[k]; t["recursive doubling"] = rd[k]; t["Rabenseifner"] = rab[k]
      for (x in t) if (t[x] < t[a]) print "at " k ": " x " beats " a; seen[k]++ } next }
  /Reduce\+bcast never wins/ { lo = 1e9; hi = 0; for (k in n) { r = rb[k] / rd[k]; if (r < lo) lo = r; if (r > hi) hi = r }
    want = sprintf("%.2f", lo) == sprintf("%.2f", hi) ? sprintf("%.2fx", lo) : sprintf("%.2f-%.2fx", lo, hi); if (index($0, want) == 0) print "ratio: want " want; next }
  /hierarchical exchange beats/ { s = $0; sub(/.* at /, "", s); sub(/ nodes\.$/, "", s); gsub(/,/, "", s); gsub(/ and /, " ", s)
    m = split(s, ns, " "); for (i = 1; i <= m; i++) if (!(h[ns[i]] < f[ns[i]])) print "hier at " ns[i]; next }
  /beats the hierarchical/ { s = $0; sub(/.* at /, "", s); sub(/ nodes\.$/, "", s); gsub(/,/, "", s); gsub(/ and /, " ", s)
    m = split(s, ns, " "); for (i = 1; i <= m; i++) if (!(f[ns[i]] <= h[ns[i]])) print "flat at " ns[i]; next }
  END { for (k in n) if (seen[k] != 1) print "node count " k " named by " seen[k] + 0 " winner sentences" }' <<<"$out")
check "every 'wins' sentence agrees with the projection table" "$bad" [ -z "$bad" ]
check "the sentences are there (one winner per node count, reduce+bcast, hierarchical vs flat)" "$out" \
  bash -c "grep -q 'fastest allreduce at' <<<'$out' && grep -q 'Reduce+bcast never wins' <<<'$out' && grep -qE 'beats the (best flat|hierarchical)' <<<'$out'"
# other parameters change the winner: at alpha 50 us and a 4 KiB message recursive doubling wins
o2=$("$PY" $M project --alpha-us 50 --bytes 4096 --nodes 2,1024)
check "alpha 50 us, 4 KiB: recursive doubling is the fastest (a sentence follows the table)" "$o2" \
  grep -q "recursive doubling is the fastest allreduce at 2 and 1,024 nodes" <<<"$o2"
"$PY" $M project --sample-us 4.614 --outdir "$TMP/proj" >/dev/null
check "project --outdir: model-projection.dat (nodes 1 .. 1024) and model-sizes.dat" "$(ls "$TMP/proj")" \
  [ "$(grep -vc '^#' "$TMP/proj/model-projection.dat")" = 11 -a -s "$TMP/proj/model-sizes.dat" ]
if command -v gnuplot >/dev/null; then
  gnuplot -e "dir='$TMP/proj'; out='$TMP/proj/model.png'" plots/model.gp 2>"$TMP/gp"; rc=$?
  check "plots/model.gp draws model.png from them, without warnings" "exit $rc: $(head -c 300 "$TMP/gp")" \
    [ $rc = 0 -a -s "$TMP/proj/model.png" -a ! -s "$TMP/gp" ]
  check "plots/model.gp: no file path in a title, 10^k axis labels, legends below the plots" "" \
    bash -c "! grep -E '^set (multiplot|title).*(dir\\.|\\.csv|\\.dat|\\.md|subtitle|/tmp|/work)' plots/model.gp && grep -q 'format x \"10^{%L}\"' plots/model.gp && grep -q '^set key below' plots/model.gp"
else
  skip "plots/model.gp" "gnuplot missing"
fi

# ---------------------------------------------------------------- validation on a synthetic comm.csv
"$PY" - "$TMP/c.csv" <<'PYEOF'
import math, sys
A, B = 1e-6, 0.1e-9           # the P = 2 link: alpha 1 us, beta 0.1 ns/byte
def lg(p): return math.ceil(math.log2(p)) if p > 1 else 0
def step(m): return A + m * B
def allreduce(p, m):          # the fastest of ring, recursive doubling, Rabenseifner (closed forms)
    return min(2 * (p - 1) * step(m / p), lg(p) * step(m), 2 * sum(step(m / 2 ** i) for i in range(1, lg(p) + 1)))
def reduce_bcast(p, m): return 2 * lg(p) * step(m)
rows = ["transport,op,ranks,nodes,ranks_per_node,bytes,repeat,warmup,iterations,min_us,avg_us,max_us,algbw_gbs,busbw_gbs,timestamp"]
for p in (2, 3, 4, 8):
    for e in range(2, 23, 2):
        m = 2 ** e
        for op, f in (("allreduce", allreduce), ("reduce-bcast", reduce_bcast)):
            t = f(p, m) if p > 2 else (step(m) if op == "allreduce" else 2 * step(m))
            for r, x in enumerate((0.99, 1.0, 1.01), start=1):
                scale = x
                if p == 4 and op == "allreduce" and m == 2 ** 20: scale *= 2                 # a miss
                if p == 8 and op == "reduce-bcast" and m == 2 ** 10 and r == 3: scale = 1.5  # a spread
                us = t * scale * 1e6
                rows.append(f"shm,{op},{p},1,{p},{m},{r},20,100,{us:.4f},{us:.4f},{us:.4f},0,0,2026-11-27T00:00:00Z")
open(sys.argv[1], "w").write("\n".join(rows) + "\n")
PYEOF
v=$("$PY" $M validate --comm "$TMP/c.csv" 2>&1); rc=$?
check "validate: exit 0" "exit $rc: $v" [ $rc = 0 ]
check "validate: the fit at P = 2 recovers alpha 1 us, beta 0.1 ns/byte" "$(grep '^# shm allreduce' <<<"$v")" \
  grep -q "^# shm allreduce: from 0 B: 1.00 us, 0.1000 ns/B$" <<<"$v"
check "validate: 66 held-out rows (P = 3, 4, 8 x 11 sizes x 2 ops); 64 hits, the 2x row a miss, the 50 % row 'spread'" \
  "$(tail -n 2 <<<"$v")" grep -q "^shm: 66 held-out rows at P >= 3: 64 within 20%, 1 outside (max |error| 50.0%), 1 whose repeats" <<<"$v"
check "validate: the miss is P = 4 allreduce at 1 MiB, the spread P = 8 reduce-bcast at 1 KiB" "$(grep -E 'miss|spread$' <<<"$v")" \
  bash -c "grep -q '^shm allreduce 4 1 1048576 3 .* miss$' <<<\"\$0\" && grep -q '^shm reduce-bcast 8 1 1024 3 .* spread$' <<<\"\$0\"" "$v"
# the fit uses only P = 2: slowing every P = 3 row leaves the P = 2 fit as it was
awk -F, 'BEGIN { OFS = "," } NR > 1 && $3 == 3 { $11 = $11 * 3 } { print }' "$TMP/c.csv" >"$TMP/c3.csv"
v3=$("$PY" $M validate --comm "$TMP/c3.csv")
check "validate: rows at P = 3 do not enter the fit (same alpha, beta; now misses at P = 3)" "$(grep '^# shm allreduce' <<<"$v3")" \
  bash -c "grep -q '^# shm allreduce: from 0 B: 1.00 us, 0.1000 ns/B$' <<<\"\$0\" && [ \$(grep -c '^shm [a-z-]* 3 .* miss$' <<<\"\$0\") -ge 20 ]" "$v3"
awk -F, 'BEGIN { OFS = "," } NR > 1 && $3 == 2 { $11 = $11 * 3 } { print }' "$TMP/c.csv" >"$TMP/c2.csv"
v2=$("$PY" $M validate --comm "$TMP/c2.csv")
check "validate: the P = 2 rows are the fit (3x slower there: no held-out row within 20 %)" "$(tail -n 2 <<<"$v2")" \
  grep -q "^shm: 66 held-out rows at P >= 3: 0 within" <<<"$v2"

# ---------------------------------------------------------------- bad input
for bad in inf 1e308 nan x; do
  awk -F, -v b="$bad" 'BEGIN { OFS = "," } NR == 5 { $11 = b } { print }' "$TMP/c.csv" >"$TMP/bad.csv"
  "$PY" $M validate --comm "$TMP/bad.csv" >"$TMP/out" 2>"$TMP/err"; rc=$?
  check "validate: avg_us '$bad' on row 5: exit 2, one line naming the file and row" "exit $rc: $(cat "$TMP/err")" \
    [ $rc = 2 -a "$(wc -l <"$TMP/err")" = 1 -a "$(grep -c "$TMP/bad.csv: row 5: avg_us" "$TMP/err")" = 1 -a ! -s "$TMP/out" ]
done
cut -d, -f1-10 "$TMP/c.csv" >"$TMP/cols.csv"
"$PY" $M validate --comm "$TMP/cols.csv" >/dev/null 2>"$TMP/err"; rc=$?
check "validate: a CSV without avg_us: exit 2, one line naming it" "exit $rc: $(cat "$TMP/err")" \
  [ $rc = 2 -a "$(wc -l <"$TMP/err")" = 1 -a "$(grep -c 'missing avg_us' "$TMP/err")" = 1 ]
"$PY" $M project --alpha-us inf >/dev/null 2>"$TMP/err"; rc=$?
check "project --alpha-us inf: exit 2, one line" "exit $rc: $(cat "$TMP/err")" [ $rc = 2 -a "$(wc -l <"$TMP/err")" = 1 ]
"$PY" $M project --efficiency 1 >/dev/null 2>"$TMP/err"; rc=$?
check "project --efficiency 1: exit 2, one line" "exit $rc: $(cat "$TMP/err")" [ $rc = 2 -a "$(wc -l <"$TMP/err")" = 1 ]

# ---------------------------------------------------------------- the committed reference
REF=results/reference/model
if [ -f $REF/comm.csv ] && [ -f $REF/validation.txt ]; then
  "$PY" $M validate --comm $REF/comm.csv >"$TMP/ref.txt" 2>&1
  check "validate on $REF/comm.csv reproduces $REF/validation.txt" "$(diff "$TMP/ref.txt" $REF/validation.txt | head -n 5)" \
    cmp -s "$TMP/ref.txt" $REF/validation.txt
else
  skip "the committed reference" "$REF/comm.csv or validation.txt missing"
fi

# ---------------------------------------------------------------- the committed report
# results/reference/REPORT.md (one full run, committed; its links and paths:
# tests/test_report_links.sh): its model sentences are the ones the model prints
RPT=results/reference/REPORT.md
if [ -f $RPT ] && [ -s results/reference/model-runs.csv ]; then
  want=$("$PY" $M project --runs results/reference/model-runs.csv --comm results/reference/comm.csv |
         grep -vE '^(#|nodes |[0-9])' | tr '\n' ' ' | sed 's/ $//')
  have=$(sed -n '/^## Performance model/,/^### Validation/p' $RPT | sed -n 's/^\*\*What this shows:\*\* //p')
  check "$RPT: the model's 'wins' sentences are those scripts/model.py project generates" "report: $have | model: $want" \
    [ -n "$want" -a "$have" = "$want" ]
else
  skip "$RPT: the model's sentences" "results/reference/ has no REPORT.md or model-runs.csv yet (./run_all.sh --results results/reference)"
fi

# ---------------------------------------------------------------- the report's section
mkdir -p "$TMP/res"
cp "$TMP/c.csv" "$TMP/res/comm.csv"
"$PY" scripts/report.py --results "$TMP/res" --plots "$TMP/proj" --out "$TMP/res/R.md" >/dev/null 2>"$TMP/R.err"; rc=$?
check "report with comm.csv: exit 0, no traceback" "exit $rc: $(grep -m1 -A5 Traceback "$TMP/R.err")" \
  bash -c "[ $rc = 0 ] && ! grep -q Traceback '$TMP/R.err'"
sec=$(sed -n '/^## Performance model/,/^## [^P]/p' "$TMP/res/R.md")
check "report: the projection beside the first-principles numbers, the sentences, the validation summary" "$(head -c 600 <<<"$sec")" \
  bash -c "grep -qF '| 128 | 657 (657) | 541 (541) | 177 (177) |' <<<\"\$0\" && grep -q 'fastest allreduce at' <<<\"\$0\" && grep -qF '| shm | 66 | 64 | 1 | 50% | 1 |' <<<\"\$0\"" "$sec"
check "report: model.png linked relative to the report" "$(grep -o '!\[model[^)]*)' <<<"$sec")" \
  grep -qF '](../proj/model.png)' <<<"$sec"
finish
