#!/usr/bin/env bash
# scripts/gpu-bundle.sh — make data/ self-sufficient for an offline GPU machine (make gpu-bundle).
#
# scripts/gpu-check.sh reads data/mnist (its equivalence checks) and data/fashion (its
# timings). `make data` leaves data/fashion/*.gz as absolute symlinks into Debian's
# dataset-fashion-mnist, which a lent GPU machine does not have (nor apt, npm or a
# network): carried there, they dangle. This replaces every symlink among the files of
# those two data sets with a copy of the file it points to (each checked first: gzip
# integrity and the uncompressed size, as scripts/get-data.sh checks them), leaves real
# files alone, and checks that the data sets total at most 64 MiB, the most the device
# tool carries with the working tree. scripts/get-data.sh accepts the copies as they are.
# Missing data sets are fetched first with scripts/get-data.sh (which needs apt and npm
# here, on the machine that bundles, not on the GPU machine).
#
# Usage: scripts/gpu-bundle.sh [--data DIR]     (DIR: default data, the repository's)
# Then: the device tool's run with carry ["data"] (docs/cuda.md, "On a lent GPU").
# Exit status: 0 bundled, 1 a file is missing, corrupt or the total too large, 2 usage.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DATA=data
LIMIT=$((64 * 1024 * 1024))
while [ $# -gt 0 ]; do
  case "$1" in
    --data) [ $# -ge 2 ] || { echo "gpu-bundle: --data needs a directory" >&2; exit 2; }; DATA=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-bundle: unknown option '$1' (--help)" >&2; exit 2 ;;
  esac
done
die() { echo "gpu-bundle: $*" >&2; exit 1; }

IDX_FILES=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
# uncompressed sizes: 16-byte header + n*784 for images, 8 + n for labels
size_of() {
  case "$1/$2" in
    fashion/train-images*) echo $((16 + 60000 * 784)) ;; fashion/train-labels*) echo $((8 + 60000)) ;;
    fashion/t10k-images*) echo $((16 + 10000 * 784)) ;;  fashion/t10k-labels*) echo $((8 + 10000)) ;;
    mnist/train-images*) echo $((16 + 8000 * 784)) ;;    mnist/train-labels*) echo $((8 + 8000)) ;;
    mnist/t10k-images*) echo $((16 + 2000 * 784)) ;;     mnist/t10k-labels*) echo $((8 + 2000)) ;;
  esac
}
# path DIR SET FILE: the file the loader reads (plain IDX first, then .gz), or nothing
path() { if [ -e "$1/$2/$3" ] || [ -L "$1/$2/$3" ]; then echo "$1/$2/$3"; elif [ -e "$1/$2/$3.gz" ] || [ -L "$1/$2/$3.gz" ]; then echo "$1/$2/$3.gz"; fi; }

# the repository's data/: fetch what is missing (another directory must hold it already)
missing=()
for set in mnist fashion; do
  for f in "${IDX_FILES[@]}"; do [ -n "$(path "$DATA" $set "$f")" ] || { missing+=("$set"); break; }; done
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$DATA" = data ] || die "$DATA/${missing[0]}: missing (bundle the repository's data/, or fetch it: make data)"
  scripts/get-data.sh "${missing[@]}" || die "scripts/get-data.sh ${missing[*]} failed"
fi

total=0 copied=0
for set in mnist fashion; do
  for f in "${IDX_FILES[@]}"; do
    p=$(path "$DATA" $set "$f")
    [ -n "$p" ] && [ -r "$p" ] || die "${p:-$DATA/$set/$f}: missing or unreadable (a dangling symlink?)"
    if [[ $p == *.gz ]]; then n=$(gzip -dc -- "$p" | wc -c) || die "$p: corrupt gzip file"; else n=$(wc -c <"$p"); fi
    [ "$n" -eq "$(size_of $set "$f")" ] || die "$p: $n bytes (uncompressed), expected $(size_of $set "$f")"
    if [ -L "$p" ]; then
      tmp="$p.bundle.$$"
      trap 'rm -f "$tmp"' EXIT
      cp -L -- "$p" "$tmp"
      mv -f -- "$tmp" "$p"
      trap - EXIT
      copied=$((copied + 1))
    fi
    total=$((total + $(stat -c %s "$p")))
  done
done
if [ $copied -gt 0 ] && [ -f "$DATA/fashion/SOURCE.txt" ]; then
  sed -i 's|^The \*\.gz files here are symlinks to \(.*\)\.$|The *.gz files here are copies of the files in \1 (scripts/gpu-bundle.sh).|' "$DATA/fashion/SOURCE.txt"
fi
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
[ "$total" -le "$LIMIT" ] || die "the data sets total $(mib "$total"), more than the $(mib $LIMIT) the device tool carries"
# what travels besides: the working tree (tracked and untracked-not-ignored files)
tree=0
if git rev-parse --show-toplevel >/dev/null 2>&1; then
  tree=$(git ls-files -z -co --exclude-standard | xargs -0 -r stat -c %s -- 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
fi
echo "gpu-bundle: $DATA/mnist + $DATA/fashion: 8 real files, $(mib "$total") ($copied symlinks replaced by copies);" \
     "with the working tree ($(mib "$tree")) $(mib $((total + tree))) of the $(mib $LIMIT) a run carries"
[ $((total + tree)) -le "$LIMIT" ] || die "data and working tree together exceed $(mib $LIMIT)"
