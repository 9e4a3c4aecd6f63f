#!/usr/bin/env bash
# tests/test_cores.sh — the sweeps fit the machine's cores, not the 2 cores this project
# was written on (scripts/lib.sh's lists, docs/sweeps.md).
#
#   1. The list functions alone (scripts/lib.sh, no run): threads/ranks lists for C = 1, 2,
#      6, 64, 128 (powers of two below C, C, 2C; --quick: at most 4), the P x T grid
#      (at most 12 points, every P*T <= 2C, 1x1, 1xC, Cx1 and the P*T = C points in it,
#      checked for every C from 1 to 130) and hybrid-bench's pairs; the rank slots of a
#      hostfile of 3 hosts x 4 slots and of a Slurm allocation (SLURM_JOB_ID=1,
#      SLURM_NTASKS=24, SLURM_CPUS_ON_NODE=8); a bad hostfile exits 2 with one line.
#   2. Usage errors: run_all.sh --threads-list 0, --grid 2y2, --cores -1, --cores abc,
#      bench/hybrid-grid.sh --grid 2y2, bench/mpi-sweep.sh --ranks-list 1,,2: exit 2, one
#      line on stderr, nothing created.
#   3. ./run_all.sh --plan --smoke --cores 8: the step lines name T = 1, 2, 4, 8, 16,
#      P = 1, 4, 8, 16 (smoke caps the ranks as --quick does; --help says so) and the grid
#      1x1 1x8 2x4 4x2 4x4 8x1; its estimate is larger than with --cores 2 (more
#      oversubscribed points); --threads-list 1,3 --grid 1x2,2x1 appear in the lines.
#   4. A real run, `./run_all.sh --smoke --no-setup --cores 8 --only openmp,mpi,hybrid
#      --steps openmp-sweep,mpi-bench,hybrid-grid` (plots and report always run): the
#      CSVs' threads are 1 2 4 8 16, mpi-bench's ranks 1 8, hybrid-grid's P x T the
#      grid; machine.json says 8 cores; REPORT.md says "8 cores" and "2 cores" (or
#      "2-core", "two cores", "2 ranks") nowhere; the figures' gnuplot commands (a gnuplot
#      on PATH that records its -e and runs the real one): openmp-threads has cores=8,
#      none has cores=2, and the hybrid-grid title says 8 cores. Then --threads-list 1,3 and --grid 1x2,2x1 on a
#      real run: openmp.csv's threads are 1 3, hybrid-grid.csv's points 1x2 2x1.
# Faked 8 cores on a small machine oversubscribe it: the smoke data is tiny (1k digits)
# and everything above the real nproc runs with OMP_WAIT_POLICY=passive, as on a real run.
# About 2-3 minutes on 2 cores. The MPI parts need mpirun, the figures gnuplot: without
# them those checks are skipped with the reason.
# shellcheck disable=SC2016  # the bash -c checks get their values as $1, $2
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
LIMIT=$((400 * SLOWDOWN))   # seconds after which a run_all.sh run counts as hung

# ---- 1. the list functions
lists() {   # "VAR=VALUE ... -- ARGS": C, the slots, nodes and every list, one line
  env -u PARTRAIN_CORES -u PARTRAIN_HOSTFILE -u SLURM_JOB_ID -u SLURM_NTASKS -u SLURM_CPUS_ON_NODE \
  bash -c 'set -euo pipefail; . scripts/lib.sh
    while [ "$1" != -- ]; do export "$1"; shift; done; shift
    while [ $# -gt 0 ]; do sweep_option "$1" "$2"; shift 2; done
    sweep_setup "${MODE:-full}"
    echo "C=$SWEEP_CORES R=$SWEEP_SLOTS N=$SWEEP_NODES T=[$SWEEP_THREADS] P=[$SWEEP_RANKS] G=[$SWEEP_GRID] H=[$SWEEP_PAIRS]"' \
    lists "$@" 2>&1
}
expect_list() {   # NAME WANTED-PATTERN VAR=... -- ARGS
  local name=$1 want=$2 got; shift 2
  got=$(lists "$@")
  if [[ $got == *"$want"* ]]; then pass "$name"; else fail "$name" "got '$got', wanted '$want'"; fi
}
expect_list "C=1: threads 1 2, grid 1x1 1x2 2x1" "T=[1 2] P=[1 2] G=[1x1 1x2 2x1]" -- --cores 1
expect_list "C=2: threads 1 2 4, grid 1x1 1x2 1x4 2x1 2x2 4x1, pairs 1x1 1x2 2x1 2x2" \
  "T=[1 2 4] P=[1 2 4] G=[1x1 1x2 1x4 2x1 2x2 4x1] H=[1x1 1x2 2x1 2x2]" -- --cores 2
expect_list "C=6: threads 1 2 4 6 12" "T=[1 2 4 6 12] P=[1 2 4 6 12]" -- --cores 6
expect_list "C=8: threads 1 2 4 8 16, pairs 1x1 1x8 2x4 4x2 4x4 8x1" \
  "T=[1 2 4 8 16] P=[1 2 4 8 16] G=[1x1 1x8 1x16 2x2 2x4 2x8 4x2 4x4 8x1 8x2 16x1] H=[1x1 1x8 2x4 4x2 4x4 8x1]" -- --cores 8
expect_list "C=64: threads 1 2 4 8 16 32 64 128" "T=[1 2 4 8 16 32 64 128] P=[1 2 4 8 16 32 64 128]" -- --cores 64
expect_list "C=64 --quick: at most 4 points (1 32 64 128), grid of 6" \
  "T=[1 32 64 128] P=[1 32 64 128] G=[1x1 1x64 4x16 8x8 16x4 64x1]" MODE=quick -- --cores 64
expect_list "C=128: threads up to 256" "T=[1 2 4 8 16 32 64 128 256]" -- --cores 128
expect_list "PARTRAIN_CORES=6 is C" "C=6 R=6 N=1 T=[1 2 4 6 12]" PARTRAIN_CORES=6 --
expect_list "--smoke keeps the threads list, caps the ranks" "T=[1 2 4 8 16] P=[1 4 8 16]" MODE=smoke -- --cores 8
printf 'node1 slots=4\n# a comment\nnode2 slots=4 max_slots=8\n\nnode3 slots=4\n' >"$TMP/hosts"
expect_list "hostfile 3 hosts x 4 slots: ranks up to 12 (and 24), threads by the cores" \
  "C=2 R=12 N=3 T=[1 2 4] P=[1 2 4 8 12 24]" -- --cores 2 --hostfile "$TMP/hosts"
expect_list "PARTRAIN_HOSTFILE is read as --hostfile" "R=12 N=3" PARTRAIN_HOSTFILE="$TMP/hosts" -- --cores 2
expect_list "Slurm: SLURM_NTASKS=24 ranks, SLURM_CPUS_ON_NODE=8 threads" \
  "C=8 R=24 N=1 T=[1 2 4 8 16] P=[1 2 4 8 16 24 48]" SLURM_JOB_ID=1 SLURM_NTASKS=24 SLURM_CPUS_ON_NODE=8 --
expect_list "--grid replaces the grid and the pairs" "G=[1x8 8x1] H=[1x8 8x1]" -- --cores 8 --grid 1x8,8x1
printf 'node1 slots=x\n' >"$TMP/badhosts"
out=$(lists -- --hostfile "$TMP/badhosts"); rc=$?
check "a hostfile with slots=x: exit 2, one line" "exit $rc: $out" \
  bash -c '[ "$1" = 2 ] && [ "$(wc -l <<<"$2")" = 1 ] && [[ $2 == *"slots= must be a positive integer"* ]]' _ "$rc" "$out"
# the grid's rules for every C from 1 to 130
bad=$(bash -c '. scripts/lib.sh
  for c in $(seq 1 130); do
    g=" $(grid_list "$c" 12) "; n=$(wc -w <<<"$g")
    [ "$n" -le 12 ] || echo "C=$c: $n points"
    for pt in $g; do [ $(( ${pt%x*} * ${pt#*x} )) -le $((2 * c)) ] || echo "C=$c: $pt above 2C"; done
    for need in 1x1 "1x$c" "${c}x1"; do [[ $g == *" $need "* ]] || echo "C=$c: no $need"; done
    for ((p = 1; p <= c; p *= 2)); do   # the P*T = C points of powers of two, while they fit
      [ $((c % p)) = 0 ] && [ "$n" -lt 12 ] && [[ $g != *" ${p}x$((c / p)) "* ]] && [ $(( (c / p) & (c / p - 1) )) = 0 ] &&
        echo "C=$c: no ${p}x$((c / p))"
    done
  done' 2>&1 | head -n 5)
check "grid for C = 1..130: at most 12 points, P*T <= 2C, 1x1, 1xC, Cx1 and the P*T = C points" "$bad" [ -z "$bad" ]

# ---- 2. usage errors: one line, exit 2, nothing created
bad_arg() {   # NAME KEY COMMAND...
  local name=$1 key=$2 rc; shift 2
  rm -rf "$TMP/bad"
  timeout 60 "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?
  if [ $rc = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ] && grep -q -- "$key" "$TMP/err" && [ ! -e "$TMP/bad" ]; then
    pass "$name"
  else
    fail "$name" "exit $rc, $(wc -l <"$TMP/err") stderr lines, $([ -e "$TMP/bad" ] && echo 'results created' || echo 'nothing created'): $(head -c 200 "$TMP/err")"
  fi
}
bad_arg "run_all --threads-list 0" "--threads-list" ./run_all.sh --smoke --no-setup --threads-list 0 --results "$TMP/bad"
bad_arg "run_all --grid 2y2" "--grid" ./run_all.sh --smoke --no-setup --grid 2y2 --results "$TMP/bad"
bad_arg "run_all --cores -1" "--cores" ./run_all.sh --smoke --no-setup --cores -1 --results "$TMP/bad"
bad_arg "run_all --cores abc" "--cores" ./run_all.sh --smoke --no-setup --cores abc --results "$TMP/bad"
bad_arg "run_all --ranks-list 1,,2" "--ranks-list" ./run_all.sh --smoke --no-setup --ranks-list 1,,2 --results "$TMP/bad"
bad_arg "run_all --steps with an unknown step" "--steps" ./run_all.sh --smoke --no-setup --only mpi --steps nonesuch --results "$TMP/bad"
bad_arg "bench/hybrid-grid.sh --grid 2y2" "--grid" bench/hybrid-grid.sh --grid 2y2 --csv "$TMP/bad/g.csv"
bad_arg "bench/mpi-sweep.sh --ranks-list 0" "--ranks-list" bench/mpi-sweep.sh --ranks-list 0 --results "$TMP/bad"
bad_arg "bench/openmp-bench.sh --cores 0" "--cores" bench/openmp-bench.sh --cores 0 --csv "$TMP/bad/o.csv"

# ---- 3. the plan: step lines and estimates, nothing run
plan=$(./run_all.sh --plan --smoke --cores 8 --only openmp,mpi,hybrid --results "$TMP/bad" 2>&1); rc=$?
check "--plan: exit 0, nothing created" "exit $rc" bash -c '[ "$1" = 0 ] && [ ! -e "$2" ]' _ "$rc" "$TMP/bad"
check "--plan --cores 8: the thread sweep is T = 1, 2, 4, 8, 16" "$(grep 'thread sweep' <<<"$plan")" \
  grep -q 'thread sweep T = 1, 2, 4, 8, 16 per mode (8 cores)' <<<"$plan"
check "--plan --cores 8 --smoke: the rank sweep is P = 1, 4, 8, 16 (capped)" "$(grep 'strong/weak' <<<"$plan")" \
  grep -q 'strong/weak scaling P = 1, 4, 8, 16,' <<<"$plan"
check "--help states the smoke cap of the ranks" "" bash -c './run_all.sh --help | grep -q "ranks and P x T capped as --quick"'
check "--plan --cores 8: the grid 1x1 1x8 2x4 4x2 4x4 8x1, the comparisons at 8" "$(grep 'hybrid' <<<"$plan" | head -n 2)" \
  bash -c 'grep -q "P x T = 1x1 1x8 2x4 4x2 4x4 8x1 (8 cores)" <<<"$1" && grep -q "T = 1, 8 vs serial" <<<"$1" &&
           grep -q "P = 1, 8, every --sync" <<<"$1" && grep -q "1 rank x 8 threads and 8 ranks x 1 thread" <<<"$1"' _ "$plan"
secs() { sed -n 's/.*about \(.*\) estimated$/\1/p' <<<"$1" | awk '{ s = 0; for (i = 1; i < NF; i += 2) s += $i * ($(i + 1) == "h" ? 3600 : $(i + 1) == "min" ? 60 : 1); print s }'; }
plan2=$(./run_all.sh --plan --smoke --cores 2 --only openmp,mpi,hybrid 2>&1)
e8=$(secs "$plan") e2=$(secs "$plan2")
check "the estimate grows with the lists ($e2 s at --cores 2, $e8 s at --cores 8)" "" \
  bash -c '[ -n "$1" ] && [ -n "$2" ] && [ "$1" -gt "$2" ]' _ "$e8" "$e2"
plan3=$(./run_all.sh --plan --smoke --only openmp,hybrid --threads-list 1,3 --grid 1x2,2x1 2>&1)
check "--plan --threads-list 1,3 --grid 1x2,2x1: the step lines use them" "$plan3" \
  bash -c 'grep -q "thread sweep T = 1, 3 per mode" <<<"$1" && grep -q "P x T = 1x2 2x1 (" <<<"$1"' _ "$plan3"

# ---- 4. a real run with 8 cores assumed
if ! command -v mpirun >/dev/null; then
  skip "run_all.sh --smoke --cores 8" "mpirun not found (apt-get install openmpi-bin)"; finish
fi
[ -d data/mnist ] || { skip "run_all.sh --smoke --cores 8" "data/mnist missing (make data)"; finish; }
for b in serial/serial openmp/openmp mpi/mpi hybrid/hybrid; do
  [ -x $b ] || { fail "$b built" "missing (make all)"; finish; }
done
gp=""
if command -v gnuplot >/dev/null; then   # a gnuplot that records its -e arguments
  mkdir -p "$TMP/bin"
  printf '#!/bin/sh\nprintf "%%s\\n" "$*" >>%s\nexec %s "$@"\n' "$TMP/gnuplot.log" "$(command -v gnuplot)" >"$TMP/bin/gnuplot"
  chmod +x "$TMP/bin/gnuplot"; gp=$TMP/bin:
fi
DIR=$TMP/c8
start=$SECONDS
PATH=$gp$PATH timeout "$LIMIT" ./run_all.sh --smoke --no-setup --cores 8 --only openmp,mpi,hybrid \
  --steps openmp-sweep,mpi-bench,hybrid-grid --results "$DIR" >"$TMP/run.log" 2>&1; rc=$?
check "run_all --smoke --cores 8 (openmp-sweep, mpi-bench, hybrid-grid): exit 0 ($((SECONDS - start)) s)" \
  "exit $rc: $(tail -n 5 "$TMP/run.log")" [ $rc = 0 ]
vals() {   # CSV PROGRAM COLUMN[,COLUMN]: the sorted distinct values (joined by x) of PROGRAM's rows
  awk -F, -v prog="$2" -v cols="$3" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    $c["program"] == prog { n = split(cols, k, ","); v = $c[k[1]]; for (j = 2; j <= n; j++) v = v "x" $c[k[j]]; print v }' "$1" |
    sort -t x -k1,1n -k2,2n -u | paste -sd' '
}
got=$(vals "$DIR/openmp.csv" openmp threads 2>/dev/null)
check "openmp.csv: threads 1 2 4 8 16" "got '$got'" [ "$got" = "1 2 4 8 16" ]
got=$(vals "$DIR/bench-mpi.csv" mpi ranks 2>/dev/null)
check "bench-mpi.csv: ranks 1 8" "got '$got'" [ "$got" = "1 8" ]
got=$(vals "$DIR/hybrid-grid.csv" hybrid ranks,threads 2>/dev/null)
check "hybrid-grid.csv: P x T 1x1 1x8 2x4 4x2 4x4 8x1" "got '$got'" [ "$got" = "1x1 1x8 2x4 4x2 4x4 8x1" ]
check "machine.json: cores 8, the real nproc beside it" "$(cat "$DIR/machine.json" 2>&1)" \
  grep -q "\"cores\": 8, \"nodes\": 1, \"slots\": 8, \"cores_from\": \"--cores\", \"real_cores\": $(nproc)," "$DIR/machine.json"
check "REPORT.md names 8 cores" "$(grep -o '.\{30\}[0-9]* cores' "$DIR/REPORT.md" | head -n 3)" grep -q '8 cores' "$DIR/REPORT.md"
two=$(grep -n -i -E '\b2 cores|2-core|two cores|\b2 ranks' "$DIR/REPORT.md" | head -n 3)
check "REPORT.md says 2 cores (2-core, two cores, 2 ranks) nowhere" "$two" [ -z "$two" ]
check "hybrid-table4.md: measured on 8 cores" "$(grep -m1 'Measured' "$DIR/hybrid-table4.md")" grep -q 'on 8 cores' "$DIR/hybrid-table4.md"
if [ -n "$gp" ]; then
  gpl=$(cat "$TMP/gnuplot.log" 2>/dev/null)
  check "figures: openmp-threads drawn with cores=8" "$gpl" grep -q "openmp-threads.png.*cores=8" <<<"$gpl"
  check "figures: no gnuplot command with cores=2 (the machine's real_cores beside it is fine)" "$(grep -E '(^|[^_a-z])cores=2\b' <<<"$gpl")" bash -c '! grep -qE "(^|[^_a-z])cores=2\b" <<<"$1"' _ "$gpl"
  check "figures: the hybrid-grid title says 8 cores" "$(grep hybrid-grid.png <<<"$gpl")" \
    bash -c 'grep "hybrid-grid.png" <<<"$1" | grep -q " 8 cores"' _ "$gpl"
else
  skip "figures' core counts" "gnuplot not found (apt-get install gnuplot-nox)"
fi

# ---- the overrides on a real run
DIR=$TMP/over
timeout "$LIMIT" ./run_all.sh --smoke --no-setup --only openmp,hybrid --steps openmp-sweep,hybrid-grid \
  --threads-list 1,3 --grid 1x2,2x1 --results "$DIR" >"$TMP/run2.log" 2>&1; rc=$?
check "run_all --threads-list 1,3 --grid 1x2,2x1: exit 0" "exit $rc: $(tail -n 5 "$TMP/run2.log")" [ $rc = 0 ]
got=$(vals "$DIR/openmp.csv" openmp threads 2>/dev/null)
check "--threads-list 1,3 honoured: openmp.csv threads 1 3" "got '$got'" [ "$got" = "1 3" ]
got=$(vals "$DIR/hybrid-grid.csv" hybrid ranks,threads 2>/dev/null)
check "--grid 1x2,2x1 honoured: hybrid-grid.csv 1x2 2x1" "got '$got'" [ "$got" = "1x2 2x1" ]
finish
