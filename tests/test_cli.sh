#!/usr/bin/env bash
# tests/test_cli.sh — the command-line contract of serial (shared by every trainer):
# --help lists every flag and README's flags table matches it; every bad value or bad
# data file gives exactly one line on stderr naming the problem, exit status 2, and no
# CSV row.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
BIN=${BIN:-serial/serial}
DATA=data/mnist

help=$($BIN --help); rc=$?
check "--help exits 0" "exit $rc" [ "$rc" -eq 0 ]
flags=$(grep -oE '^ +--[a-z-]+' <<<"$help" | tr -d ' ' | sort -u)
for f in --data --train --test --image-size --hidden --activation --batch --epochs --lr --seed --csv --predict --quiet --help; do
  grep -qx -- "$f" <<<"$flags" || fail "--help lists $f" "missing from --help"
done
pass "--help lists every common flag"
undocumented=$(for f in $flags; do grep -q -- "\`$f" README.md || echo "$f"; done)
check "README's flags table documents every flag of --help" "not in README: $undocumented" [ -z "$undocumented" ]

# expect_error NAME KEYWORD ARGS...: exit 2, one stderr line containing KEYWORD, no CSV
expect_error() {
  local name=$1 key=$2; shift 2
  local csv=$TMP/err.csv
  rm -f "$csv"
  "$BIN" --csv "$csv" "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  local lines; lines=$(wc -l <"$TMP/err")
  if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$key" "$TMP/err" && [ ! -e "$csv" ]; then
    pass "$name"
  else
    fail "$name" "exit $rc, $lines stderr lines, csv $([ -e "$csv" ] && echo written || echo absent): $(head -c 300 "$TMP/err")"
  fi
}
expect_error "--epochs 0 rejected" "--epochs" --data $DATA --epochs 0
expect_error "--epochs -3 rejected" "--epochs" --data $DATA --epochs -3
expect_error "--epochs abc rejected" "--epochs" --data $DATA --epochs abc
expect_error "--batch 0 rejected" "--batch" --data $DATA --batch 0
expect_error "--batch 2.5 rejected" "--batch" --data $DATA --batch 2.5
expect_error "--batch larger than the training set rejected" "--batch" --data $DATA --batch 9000
expect_error "--lr -1 rejected" "--lr" --data $DATA --lr -1
expect_error "--lr nan rejected" "--lr" --data $DATA --lr nan
expect_error "--lr 0 rejected" "--lr" --data $DATA --lr 0
expect_error "unknown activation rejected" "tanh" --data $DATA --activation tanh
expect_error "--hidden 0 rejected" "--hidden" --data $DATA --hidden 0
expect_error "--hidden 256,, rejected" "--hidden" --data $DATA --hidden 256,,
expect_error "--image-size 0 rejected" "--image-size" --data $DATA --image-size 0
expect_error "--train beyond the file rejected" "8000" --data $DATA --train 100000
expect_error "--test beyond the file rejected" "2000" --data $DATA --test 5000
expect_error "unknown flag rejected" "--frobnicate" --data $DATA --frobnicate
expect_error "missing flag value rejected" "--epochs" --data $DATA --epochs
expect_error "--gemm unknown rejected" "--gemm" --data $DATA --gemm magic
expect_error "missing data directory names the file" "/nonexistent/dir" --data /nonexistent/dir

# a truncated image file: one-line error naming the file, exit 2, no CSV
mkdir -p "$TMP/trunc"
for f in train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do cp "$DATA/$f" "$TMP/trunc/"; done
head -c 100000 "$DATA/train-images-idx3-ubyte" >"$TMP/trunc/train-images-idx3-ubyte"
expect_error "truncated image file names the file" "train-images-idx3-ubyte" --data "$TMP/trunc"
# wrong magic (labels file in place of the images)
mkdir -p "$TMP/magic"
cp "$DATA"/* "$TMP/magic/"; cp "$DATA/train-labels-idx1-ubyte" "$TMP/magic/train-images-idx3-ubyte"
expect_error "wrong magic names the file" "magic" --data "$TMP/magic"

# --predict shows ASCII art with predicted and true labels
out=$($BIN --data $DATA --train 500 --test 20 --epochs 1 --predict 2 --csv none 2>&1)
check "--predict 2 prints two labelled ASCII images" "$(head -c 300 <<<"$out")" \
  [ "$(grep -c 'predicted [0-9], true [0-9]' <<<"$out")" -eq 2 ]
art=$(grep -A28 'test image 0' <<<"$out" | tail -n 28 | grep -c '[#@%]')
check "--predict draws the digit" "only $art rows with ink" [ "$art" -ge 5 ]
finish
