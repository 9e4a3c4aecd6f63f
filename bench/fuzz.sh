#!/usr/bin/env bash
# bench/fuzz.sh — runs the libFuzzer harnesses of the IDX loader, the flag parser and the
# checkpoint reader (tests/fuzz/, built by `make fuzz`, which this script runs first) and
# reports, per target, what the run did.
#
# Usage: bench/fuzz.sh [--runs N | --seconds S] [--target idx|options|checkpoint]
#   (default)     10,000,000 executions in total: 7,000,000 of options (fuzz_options, about
#                 25k exec/s on one core), 2,000,000 of idx (fuzz_idx, about 2k exec/s: each
#                 input is two files that the loader opens up to six times) and 1,000,000
#                 of checkpoint (fuzz_checkpoint: one file, read twice); about 25 min
#   --runs N      N executions in total, split the same way (70 %, 20 %, 10 %)
#   --seconds S   S seconds in total instead, a third per target (CI: --seconds 30, 10 s each)
#   --target T    only T (idx, options or checkpoint): all of N or S goes to it
# Each target starts from the committed seed corpus tests/fuzz/corpus/T (only read) and
# from what earlier runs added in build/fuzz/corpus/T, where new inputs go. Its dictionary
# is tests/fuzz/T.dict; inputs are at most 4096 bytes; one input may take 10 s at most.
# libFuzzer's own log: build/fuzz/logs/T.log. A crash, a sanitizer report, a leak, a
# timeout or a broken contract check stops that target and saves the input that did it in
# build/fuzz/artifacts/T/ (reproduce: build/fuzz/fuzz_T FILE).
# Output per target: executions, seconds, exec/s, cov and ft (libFuzzer's final figures:
# edges and features covered), corpus (inputs and bytes), crashes; then a table of them all.
# Exit status: 0 no target crashed; 1 a target crashed (its reproducer is named) or ended
# otherwise than by its limit; 2 a usage error, or make fuzz failed (clang or libFuzzer
# missing: it says which).
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib.sh

runs="" seconds="" targets=(options idx checkpoint)
while [ $# -gt 0 ]; do
  case "$1" in
    --runs)    need_value "$@"; runs=$2; shift 2 ;;
    --seconds) need_value "$@"; seconds=$2; shift 2 ;;
    --target)  need_value "$@"; targets=("$2"); shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -z "$runs" ] || [ -z "$seconds" ] || die "--runs and --seconds: give one of them, not both"
[ -n "$runs$seconds" ] || runs=10000000
[ -z "$runs" ] || [[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs: not a positive integer: '$runs'"
[ -z "$seconds" ] || [[ $seconds =~ ^[1-9][0-9]*$ ]] || die "--seconds: not a positive integer: '$seconds'"
case "${targets[*]}" in options\ idx\ checkpoint|options|idx|checkpoint) ;; *) die "--target: unknown target '${targets[*]}' (idx, options, checkpoint)" ;; esac

make -s fuzz >/dev/null || die "make fuzz failed (see above)"

# the limit of target $1: its share of the runs (options 70 %, idx 20 %, checkpoint the
# rest) or of the seconds (a third each)
limit_of() {
  if [ -n "$seconds" ]; then
    echo "-max_total_time=$(( (seconds + ${#targets[@]} - 1) / ${#targets[@]} ))"
  elif [ ${#targets[@]} -eq 1 ]; then
    echo "-runs=$runs"
  elif [ "$1" = options ]; then
    echo "-runs=$(( runs * 7 / 10 ))"
  elif [ "$1" = idx ]; then
    echo "-runs=$(( runs * 2 / 10 ))"
  else
    echo "-runs=$(( runs - runs * 7 / 10 - runs * 2 / 10 ))"
  fi
}

# field NAME LINE: the number after "NAME: " in a libFuzzer status line
field() { sed -n "s/.* $1: \([0-9/b]*\).*/\1/p" <<<"$2"; }

mkdir -p build/fuzz/logs
failed=() rows=()
for t in "${targets[@]}"; do
  bin=build/fuzz/fuzz_$t corpus=build/fuzz/corpus/$t artifacts=build/fuzz/artifacts/$t log=build/fuzz/logs/$t.log
  mkdir -p "$corpus" "$artifacts"
  limit=$(limit_of "$t")
  echo "fuzz: $t: $bin $limit (log: $log)"
  # -close_fd_mask=2: the targets' own stderr (options_die's lines) closed; libFuzzer and the
  # sanitizers report on a copy of it
  rc=0 start=$(date +%s%N)
  "$bin" "$limit" -max_len=4096 -timeout=10 -close_fd_mask=2 -print_final_stats=1 -interrupted_exitcode=130 \
    -dict="tests/fuzz/$t.dict" -artifact_prefix="$artifacts/" "$corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  # a fuzz_idx that crashed could not remove its directory of file links: those of ended processes go
  for d in /dev/shm/partrain-fuzz-idx.* /tmp/partrain-fuzz-idx.* /dev/shm/partrain-fuzz-ckpt.*; do
    [ -e "$d" ] && ! kill -0 "${d##*.}" 2>/dev/null && rm -rf "$d"
  done
  [ "$rc" -ne 130 ] || { echo "fuzz: $t: interrupted (log: $log)" >&2; exit 130; }
  secs=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')

  # executions: libFuzzer's count; exec/s: over the whole run (start-up included; libFuzzer's
  # own figure is in whole seconds, 0 for a short run)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(awk -v n="${execs:-0}" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  cov=$(field cov "$last") ft=$(field ft "$last") corp=$(field corp "$last")
  inputs=${corp%%/*} bytes=${corp#*/} bytes=${bytes%b}
  [ -n "$corp" ] || inputs="?" bytes="?"
  reproducers=$(sed -n "s/.*Test unit written to \(.*\)$/\1/p" "$log")
  crashes=$(grep -c . <<<"$reproducers" || true)
  printf 'fuzz: %s: %s executions in %s s (%s exec/s), cov %s, ft %s, corpus %s inputs (%s bytes), crashes %s\n' \
    "$t" "${execs:-?}" "$secs" "$rate" "${cov:-?}" "${ft:-?}" "$inputs" "$bytes" "$crashes"
  rows+=("| $t | ${execs:-?} | $secs | $rate | ${cov:-?} | ${ft:-?} | $inputs ($bytes bytes) | $crashes |")
  if [ "$crashes" -gt 0 ]; then
    grep -E 'contract broken|^SUMMARY|ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|runtime error' "$log" |
      head -n 5 | sed 's/^/  | /'
    while read -r r; do echo "fuzz: $t: reproducer saved: $r (run: $bin $r)"; done <<<"$reproducers"
    failed+=("$t")
  elif [ "$rc" -ne 0 ]; then
    tail -n 5 "$log" | sed 's/^/  | /'
    echo "fuzz: $t: $bin exited with status $rc without saving a reproducer; see $log"
    failed+=("$t")
  fi
done

echo
echo "| target | executions | seconds | exec/s | cov | ft | corpus: inputs | crashes |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (reproducers above, logs in build/fuzz/logs/)" >&2
  exit 1
fi
echo "fuzz: no crashes"
