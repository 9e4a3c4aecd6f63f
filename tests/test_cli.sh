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
missing=$(for f in --data --train --test --image-size --hidden --activation --batch --epochs --lr --seed --csv \
             --predict --quiet --list-variants --help; do grep -qx -- "$f" <<<"$flags" || echo "$f"; done)
check "--help lists every common flag" "missing from --help: $missing" [ -z "$missing" ]
undocumented=$(for f in $flags; do grep -q -- "\`$f" README.md || echo "$f"; done)
check "README's flags table documents every flag of --help" "not in README: $undocumented" [ -z "$undocumented" ]
# --list-variants: NAME<TAB>FLAGS<TAB>description lines, and every FLAGS selects a variant
# that the program accepts (a run that would reach the data fails on the data, not the flag)
variants=$($BIN --list-variants); rc=$?
bad=$(awk -F'\t' 'NF != 3 || $1 == "" || $2 !~ /^--/' <<<"$variants")
check "--list-variants: one NAME<TAB>FLAGS<TAB>description line per variant" "exit $rc: ${bad:-no lines}" \
  [ "$rc" -eq 0 ] && [ -n "$variants" ] && [ -z "$bad" ]
while IFS=$'\t' read -r name vflags _; do
  read -r -a vargs <<<"$vflags"
  $BIN "${vargs[@]}" --data /nonexistent/dir --csv none >/dev/null 2>"$TMP/verr"
  check "--list-variants: '$vflags' ($name) is accepted" "$(head -c 200 "$TMP/verr")" grep -q /nonexistent/dir "$TMP/verr"
done <<<"$variants"

# expect_error (tests/lib.sh): exit 2, one stderr line containing the keyword, no CSV
expect_error "--epochs 0 rejected" "--epochs" "$BIN" --csv "$TMP/err.csv" --data $DATA --epochs 0
expect_error "--epochs -3 rejected" "--epochs" "$BIN" --csv "$TMP/err.csv" --data $DATA --epochs -3
expect_error "--epochs abc rejected" "--epochs" "$BIN" --csv "$TMP/err.csv" --data $DATA --epochs abc
expect_error "--batch 0 rejected" "--batch" "$BIN" --csv "$TMP/err.csv" --data $DATA --batch 0
expect_error "--batch 2.5 rejected" "--batch" "$BIN" --csv "$TMP/err.csv" --data $DATA --batch 2.5
expect_error "--batch larger than the training set rejected" "--batch" "$BIN" --csv "$TMP/err.csv" --data $DATA --batch 9000
expect_error "--lr -1 rejected" "--lr" "$BIN" --csv "$TMP/err.csv" --data $DATA --lr -1
expect_error "--lr nan rejected" "--lr" "$BIN" --csv "$TMP/err.csv" --data $DATA --lr nan
expect_error "--lr 0 rejected" "--lr" "$BIN" --csv "$TMP/err.csv" --data $DATA --lr 0
expect_error "--seed with white space before a minus sign rejected" "--seed" "$BIN" --csv "$TMP/err.csv" --data $DATA --seed $'\t-1'
expect_error "unknown activation rejected" "tanh" "$BIN" --csv "$TMP/err.csv" --data $DATA --activation tanh
expect_error "--hidden 0 rejected" "--hidden" "$BIN" --csv "$TMP/err.csv" --data $DATA --hidden 0
expect_error "--hidden 256,, rejected" "--hidden" "$BIN" --csv "$TMP/err.csv" --data $DATA --hidden 256,,
expect_error "--image-size 0 rejected" "--image-size" "$BIN" --csv "$TMP/err.csv" --data $DATA --image-size 0
expect_error "--train beyond the file rejected" "8000" "$BIN" --csv "$TMP/err.csv" --data $DATA --train 100000
expect_error "--test beyond the file rejected" "2000" "$BIN" --csv "$TMP/err.csv" --data $DATA --test 5000
expect_error "unknown flag rejected" "--frobnicate" "$BIN" --csv "$TMP/err.csv" --data $DATA --frobnicate
expect_error "missing flag value rejected" "--epochs" "$BIN" --csv "$TMP/err.csv" --data $DATA --epochs
expect_error "--gemm unknown rejected" "--gemm" "$BIN" --csv "$TMP/err.csv" --data $DATA --gemm magic
expect_error "missing data directory names the file" "/nonexistent/dir" "$BIN" --csv "$TMP/err.csv" --data /nonexistent/dir

# a truncated image file: one-line error naming the file, exit 2, no CSV
mkdir -p "$TMP/trunc"
for f in train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do cp "$DATA/$f" "$TMP/trunc/"; done
head -c 100000 "$DATA/train-images-idx3-ubyte" >"$TMP/trunc/train-images-idx3-ubyte"
expect_error "truncated image file names the file" "train-images-idx3-ubyte" "$BIN" --csv "$TMP/err.csv" --data "$TMP/trunc"
# wrong magic (labels file in place of the images)
mkdir -p "$TMP/magic"
cp "$DATA"/* "$TMP/magic/"; cp "$DATA/train-labels-idx1-ubyte" "$TMP/magic/train-images-idx3-ubyte"
expect_error "wrong magic names the file" "magic" "$BIN" --csv "$TMP/err.csv" --data "$TMP/magic"

# --predict shows ASCII art with predicted and true labels
out=$($BIN --data $DATA --train 500 --test 20 --epochs 1 --predict 2 --csv none 2>&1)
check "--predict 2 prints two labelled ASCII images" "$(head -c 300 <<<"$out")" \
  [ "$(grep -c 'predicted [0-9], true [0-9]' <<<"$out")" -eq 2 ]
art=$(grep -A28 'test image 0' <<<"$out" | tail -n 28 | grep -c '[#@%]')
check "--predict draws the digit" "only $art rows with ink" [ "$art" -ge 5 ]
finish
