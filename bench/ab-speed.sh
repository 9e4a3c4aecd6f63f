#!/usr/bin/env bash
# bench/ab-speed.sh — is this tree as fast as another commit? Old and new binaries,
# side by side, alternating (A B A B ...), so that the machine's slow and fast stretches
# fall on both alike; per trainer the median over the pairs of new/old epoch time.
#
# Usage: bench/ab-speed.sh [--base REV] [--base-env "K=V ..."] [--trainers LIST] [--pairs N]
#                          [--epochs E] [--train N] [--image-size S] [--csv FILE] [--max-other C]
#   --base REV   the commit to compare against [HEAD~1]; built in a temporary git worktree
#   --base-env "K=V ..."  environment of the old runs only (an old setting: with --base HEAD,
#                the same code with and without it)
#   --trainers LIST  comma-separated, of serial, openmp-{critical,reduction,owner,loop,model}-T2,
#                mpi-allreduce-P2, mpi-reduce-bcast-P2, mpi-overlap-P2, shm-P2, hybrid-2x1,
#                hybrid-1x1, cnn-1x1 [serial,openmp-loop-T2,mpi-allreduce-P2,cnn-1x1]
#   --pairs N    alternating old/new pairs per configuration [5]
#   --epochs E   epochs per run; each run's epoch_seconds_median (epochs 2..E) is used [4]
#   --train N    Fashion-MNIST training samples per run [20000]
#   --image-size S  every run with --image-size S (S x S inputs; 112: 12,544) [28]
#   --csv FILE   every run's row [results/ab-speed.csv]; an existing file must be this
#                benchmark's own (its header), or it is refused
#   --max-other C  other load in cores above which a run is marked disturbed [0.05]
# Configurations (default: those whose speed a kernel refactor could change): serial;
# openmp --accum loop|model --threads 2; mpi --sync allreduce|reduce-bcast|overlap and
# mpi/shm with 2 ranks; hybrid P x 1 with --threads 1; cnn 1 rank x 1 thread.
# Every run holds the benchmark lock and its other load is measured (bench_run in
# scripts/lib.sh: a busy machine is said once, and measured anyway).
# Output: one line per run and per pair, then a table "trainer | old (s) | new (s) |
# new/old median of pair ratios | disturbed runs"; a CSV of every run in --csv FILE:
# trainer,kind,pair,epoch_seconds_median,other_load_cores,disturbed
# (kind old|new; other_load_cores: the other processes' load during the run, in cores;
# disturbed: 1 when it exceeded --max-other).
# Exit status: 0 (a benchmark reports, it does not judge; also on a busy machine), 2 on a
# usage error, 1 when a build or run fails; each with its reason on stderr.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh   # die, need_value, bench_run; the ERR trap: a failing command names itself

base=HEAD~1 pairs=5 epochs=4 train=20000 image_size=28 csv=results/ab-speed.csv base_env="" trainers=serial,openmp-loop-T2,mpi-allreduce-P2,cnn-1x1
while [ $# -gt 0 ]; do
  case $1 in
    --base) need_value "$@"; base=$2; shift 2 ;;
    --base-env) need_value "$@"; base_env=$2; shift 2 ;;
    --trainers) need_value "$@"; trainers=$2; shift 2 ;;
    --pairs) need_value "$@"; pairs=$2; shift 2 ;;
    --epochs) need_value "$@"; epochs=$2; shift 2 ;;
    --train) need_value "$@"; train=$2; shift 2 ;;
    --image-size) need_value "$@"; image_size=$2; shift 2 ;;
    --csv) need_value "$@"; csv=$2; shift 2 ;;
    --max-other) need_value "$@"; bench_load_option "$1" "$2"; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $pairs =~ ^[1-9][0-9]*$ && $epochs =~ ^[2-9][0-9]*$ && $train =~ ^[1-9][0-9]*$ && $image_size =~ ^[1-9][0-9]*$ ]] ||
  die "--pairs, --train and --image-size must be positive integers, --epochs at least 2"
rev=$(git rev-parse --verify --quiet "$base^{commit}") || die "--base $base: no such commit"
[ ! -L "$csv" ] || die "--csv $csv: a symbolic link; give the file itself"
[ ! -e "$csv" ] || head -n 1 "$csv" | grep -q '^trainer,kind,pair,' || die "--csv $csv: an existing file that is not this benchmark's"
[ -d "$(dirname "$csv")" ] || [ "$csv" = results/ab-speed.csv ] || die "--csv $csv: its directory does not exist"
[ -d data/fashion ] || die "data/fashion missing (make data)"
read -r -a old_env <<<"$base_env"
for kv in "${old_env[@]}"; do [[ $kv =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || die "--base-env: not K=V: '$kv'"; done
IFS=, read -r -a list <<<"$trainers"
[ ${#list[@]} -gt 0 ] || die "--trainers: empty list"
progs=()
for t in "${list[@]}"; do
  case $t in
    serial) progs+=(serial/serial) ;;
    openmp-critical-T2|openmp-reduction-T2|openmp-owner-T2|openmp-loop-T2|openmp-model-T2) progs+=(openmp/openmp) ;;
    mpi-allreduce-P2|mpi-reduce-bcast-P2|mpi-overlap-P2) progs+=(mpi/mpi) ;;
    shm-P2) progs+=(mpi/shm) ;;
    hybrid-2x1|hybrid-1x1) progs+=(hybrid/hybrid) ;;
    cnn-1x1) progs+=(cnn/cnn) ;;
    *) die "--trainers: unknown trainer '$t' (see --help)" ;;
  esac
done
read -r -a progs <<<"$(printf '%s\n' "${progs[@]}" | sort -u | paste -sd' ')"
need_tools flock taskset mpirun

old=$(mktemp -d /tmp/partrain-ab-XXXXXX)
# shellcheck disable=SC2016  # $old: expanded at exit
bench_at_exit 'git worktree remove --force "$old" >/dev/null 2>&1 || rm -rf "$old"'
bench_cpu_line
echo "ab-speed: building $base (${rev:0:10}) in $old and this tree"
git worktree add --detach -q "$old" "$rev"
make -s -C "$old" "${progs[@]}" >/dev/null || { echo "ab-speed: building $base failed" >&2; exit 1; }
make -s "${progs[@]}" >/dev/null || { echo "ab-speed: building this tree failed" >&2; exit 1; }

mkdir -p "$(dirname "$csv")"
echo "trainer,kind,pair,epoch_seconds_median,$BENCH_COLS" >"$csv"
common=(--data data/fashion --train "$train" --test 1000 --epochs "$epochs" --image-size "$image_size" --quiet)
echo "ab-speed: every run with ${common[*]}"
bench_tmp
BENCH_CSV=$BENCH_TMP/run.csv BENCH_TOTAL=$((${#list[@]} * 2 * pairs)) BENCH_WIDTH=26 BENCH_CUT=90
run() {   # TRAINER DIR KIND PAIR: one run (bench_run), its row appended to $csv; EPOCH: its epoch median
  local t=$1 d=$2 cmd=(env)
  [ "$3" = new ] || cmd+=("${old_env[@]}")
  case $t in
    serial) cmd+=(taskset -c 0 "$d/serial/serial") ;;
    openmp-*-T2) t=${t#openmp-}; cmd+=(OMP_WAIT_POLICY= "$d/openmp/openmp" --threads 2 --accum "${t%-T2}") ;;
    mpi-*-P2) t=${t#mpi-}; cmd+=(scripts/mpirun.sh 2 "$d/mpi/mpi" --sync "${t%-P2}") ;;
    shm-P2) cmd+=(scripts/mpirun.sh 2 "$d/mpi/shm") ;;
    hybrid-?x1) cmd+=(scripts/mpirun.sh "${t:7:1}" "$d/hybrid/hybrid" --threads 1) ;;
    cnn-1x1) cmd+=(scripts/mpirun.sh 1 "$d/cnn/cnn" --threads 1) ;;
  esac
  t=$1
  rm -f "$BENCH_CSV"
  bench_run "$t $3" "${cmd[@]}" "${common[@]}" </dev/null
  EPOCH=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "epoch_seconds_median") c = i; next } { print $c }' "$BENCH_CSV")
  echo "$t,$3,$4,$EPOCH,$BENCH_OTHER,$BENCH_DISTURBED" >>"$csv"
}
for t in "${list[@]}"; do
  for p in $(seq 1 "$pairs"); do
    run $t "$old" old "$p"; a=$EPOCH
    run $t . new "$p"; b=$EPOCH
    printf '%-18s pair %d: old %.4f s  new %.4f s  new/old %.3f\n' "$t" "$p" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { print b / a }')"
  done
done
echo
echo "| trainer | old epoch (s, median) | new epoch (s, median) | new/old (median of $pairs pair ratios) | disturbed runs |"
echo "|---|---:|---:|---:|---:|"
awk -F, -v trainers="${list[*]}" 'NR > 1 { v[$1 "," $2 "," $3] = $4; t[$1] = 1; n[$1] = ($3 > n[$1] ? $3 : n[$1]); dist[$1] += ($6 == 1) }
  function median(a, k,   i, j, x) { for (i = 2; i <= k; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
  END { m = split(trainers, order, " ")
    for (o = 1; o <= m; o++) { tr = order[o]; if (!(tr in t)) continue; k = n[tr]
      for (p = 1; p <= k; p++) { A[p] = v[tr ",old," p]; B[p] = v[tr ",new," p]; R[p] = B[p] / A[p] }
      printf "| %s | %.4f | %.4f | %.3f | %d of %d |\n", tr, median(A, k), median(B, k), median(R, k), dist[tr], 2 * k } }' "$csv"
echo "(every run: $csv)"
