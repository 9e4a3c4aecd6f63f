#!/usr/bin/env bash
# bench/trace-pair.sh — the before/after pair of timelines of one loss removed (issue 32):
# one configuration traced twice, before (another commit's binaries, or extra environment
# that restores an old setting) and after (this tree), each over epoch 2's first 50 steps
# (warm caches), each drawn as one step (scripts/timeline.py) and summed per rank and
# category (scripts/trace_summary.py), the two summaries printed one after the other.
#
# Usage: bench/trace-pair.sh --name NAME [--base REV] [--before-env "K=V ..."] [--out DIR]
#                            [--train N] [--data DIR] -- LAUNCH...
#   --name NAME         the pair's name: DIR/NAME-before.json, DIR/NAME-after.json,
#                       DIR/timeline-NAME-before.png, DIR/timeline-NAME-after.png
#   --base REV          the before side runs REV's build of the program (a temporary git
#                       worktree, built with make)
#   --before-env "K=V"  environment of the before side only (space-separated K=V words)
#   --out DIR           [results/trace-pairs]
#   --train N           training samples [10000]
#   --data DIR          IDX data [data/fashion]
#   LAUNCH              the command up to the program's own flags, e.g.
#                       scripts/mpirun.sh 2 mpi/mpi --sync allreduce; its program is the
#                       first word that is one of the suite's trainers (serial/serial, ...)
# Every run adds: --data DIR --train N --test 500 --batch 64 --epochs 2 --quiet
# --csv none --trace FILE --trace-from K --trace-steps 50 (K = ceil(N / 64): epoch 2's first step).
# The two runs are seconds apart, not alternated: a pair shows where the time goes, the
# speed-up is measured by bench/ab-speed.sh or alternating pairs (docs/NOTES.md).
# Exit status: 0; 2 on a usage error; 1 when a build, a run or a figure fails.
export LC_ALL=C
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh   # die, need_value, bench_tmp, bench_at_exit

name="" base="" before_env="" out=results/trace-pairs train=10000 data=data/fashion
while [ $# -gt 0 ]; do
  case $1 in
    --name) need_value "$@"; name=$2; shift 2 ;;
    --base) need_value "$@"; base=$2; shift 2 ;;
    --before-env) need_value "$@"; before_env=$2; shift 2 ;;
    --out) need_value "$@"; out=$2; shift 2 ;;
    --train) need_value "$@"; train=$2; shift 2 ;;
    --data) need_value "$@"; data=$2; shift 2 ;;
    -h|--help) bench_usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $name =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "--name: letters, digits, '.', '_' and '-' only, got '$name'"
[[ $train =~ ^[1-9][0-9]*$ ]] || die "--train: not a positive integer: '$train'"
[ -n "$base" ] || [ -n "$before_env" ] || die "nothing differs: give --base REV or --before-env"
[ $# -gt 0 ] || die "no LAUNCH command after --"
for kv in $before_env; do [[ $kv =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || die "--before-env: not K=V: '$kv'"; done
launch=("$@") prog_at=-1
for i in "${!launch[@]}"; do
  case ${launch[$i]} in serial/serial|openmp/openmp|mpi/mpi|mpi/shm|mpi/pipeline|hybrid/hybrid|cnn/cnn) prog_at=$i; break ;; esac
done
[ $prog_at -ge 0 ] || die "LAUNCH names none of the trainers (serial/serial, openmp/openmp, mpi/mpi, ...)"
prog=${launch[$prog_at]}
[ -d "$data" ] || die "--data $data: no such directory (make data)"
[ ! -L "$out" ] || die "--out $out: a symbolic link; give the directory itself"
mkdir -p "$out" || die "--out $out: cannot create it"
for f in "$out/$name-before.json" "$out/$name-after.json"; do
  [ ! -e "$f" ] || head -c 20 "$f" | grep -q '^{"partrain_trace":1,' || die "$f exists and is not a partrain trace"
done

make -s "$prog" >/dev/null || { echo "trace-pair: building $prog failed" >&2; exit 1; }
before_prog=$prog
if [ -n "$base" ]; then
  rev=$(git rev-parse --verify --quiet "$base^{commit}") || die "--base $base: no such commit"
  old=$(mktemp -d /tmp/partrain-pair-XXXXXX)
  # shellcheck disable=SC2016  # $old: expanded at exit
  bench_at_exit 'git worktree remove --force "$old" >/dev/null 2>&1 || rm -rf "$old"'
  git worktree add --detach -q "$old" "$rev"
  make -s -C "$old" "$prog" >/dev/null || { echo "trace-pair: building $prog at $base failed" >&2; exit 1; }
  before_prog=$old/$prog
fi
first=$(( (train + 63) / 64 ))
flags=(--data "$data" --train "$train" --test 500 --batch 64 --epochs 2 --quiet --csv none
       --trace-from "$first" --trace-steps 50)
for side in before after; do
  cmd=("${launch[@]}") envs=()
  if [ $side = before ]; then cmd[$prog_at]=$before_prog; read -r -a envs <<<"$before_env"; fi
  echo "trace-pair: $side: ${envs[*]:+${envs[*]} }${cmd[*]} --trace $out/$name-$side.json"
  env "${envs[@]}" "${cmd[@]}" "${flags[@]}" --trace "$out/$name-$side.json" </dev/null ||
    { echo "trace-pair: the $side run failed" >&2; exit 1; }
  /usr/bin/python3 scripts/timeline.py --out "$out/timeline-$name-$side.png" \
    --title "$name, $side" "$out/$name-$side.json" || { echo "trace-pair: the $side figure failed" >&2; exit 1; }
done
for side in before after; do
  echo "== $side"
  /usr/bin/python3 scripts/trace_summary.py "$out/$name-$side.json"
done
