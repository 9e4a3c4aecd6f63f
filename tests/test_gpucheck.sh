#!/usr/bin/env bash
# tests/test_gpucheck.sh — scripts/gpu-check.sh as an offline GPU machine would run it.
# In a temporary copy of the repository (the working tree's files, and data/ copied as it
# is here: Fashion-MNIST as symlinks into Debian's package), `scripts/gpu-bundle.sh` must
# turn data/ into real files within 64 MiB; then, with a PATH on which apt, apt-get and npm
# do not exist (symlinks to every other tool of this PATH), scripts/get-data.sh must accept
# the copies, and gpu-check must pass its preflight and data checks and build cuda/cuda
# (--stop-after build), and without --stop-after get past the build to the device probe
# (exit 3 here: no GPU). Without nvcc it must name nvcc alone and exit 2; without make it
# must name make and not nvcc; a data file that is a dangling symlink (what carrying the
# unbundled data/ gives) must be named, exit 2, nothing built.
cd "$(dirname "$0")/.." || exit 1
. tests/lib.sh
LIMIT=$((300 * SLOWDOWN))

NVCC_DIR=$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")
HAVE_NVCC=0; [ -x "$NVCC_DIR/nvcc" ] && HAVE_NVCC=1
for d in mnist fashion; do
  [ -d data/$d ] || { skip "gpu-check offline" "data/$d missing (make data)"; finish; }
done

# ---- a copy of the repository: tracked and untracked-not-ignored files, and data/
R=$TMP/repo
mkdir -p "$R"
git ls-files -z -co --exclude-standard | grep -zv '^data$' | xargs -0 cp --parents -P -t "$R" 2>/dev/null
mkdir -p "$R/data" && cp -a data/mnist data/fashion "$R/data/"   # symlinks stay symlinks
links_before=$(find "$R/data" -type l | wc -l)

# ---- the bundle step
"$R/scripts/gpu-bundle.sh" >"$TMP/bundle" 2>&1; rc=$?
links=$(find "$R/data/mnist" "$R/data/fashion" -type l | wc -l)
total=$(find "$R/data/mnist" "$R/data/fashion" -name '*-ubyte*' -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
check "gpu-bundle: data/ as real files ($links_before symlinks before, $links after), $total bytes <= 64 MiB: $(cat "$TMP/bundle")" \
  "exit $rc, $links symlinks left, $total bytes: $(head -c 300 "$TMP/bundle")" \
  [ $rc -eq 0 ] && [ "$links" -eq 0 ] && [ "$(find "$R/data" -name '*-ubyte*' -type f | wc -l)" -eq 8 ] && [ "$total" -le $((64 * 1048576)) ]

# ---- a PATH without apt, apt-get, apt-cache, npm, npx (and without nvcc: added where wanted)
FAKE=$TMP/bin
mkdir -p "$FAKE"
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [ -d "$d" ] || continue
  for t in "$d"/*; do
    n=${t##*/}
    case "$n" in apt|apt-get|apt-cache|npm|npx|nvcc) continue ;; esac
    [ -x "$t" ] && [ ! -e "$FAKE/$n" ] && ln -s "$t" "$FAKE/$n"
  done
done
check "the test PATH has no apt-get, apt or npm" "$(PATH=$FAKE command -v apt-get apt npm)" \
  eval '! PATH=$FAKE command -v apt-get >/dev/null && ! PATH=$FAKE command -v apt >/dev/null && ! PATH=$FAKE command -v npm >/dev/null'
offline() { (cd "$R" && PATH=$FAKE${1:+:$1} CUDA_HOME=/nonexistent timeout $LIMIT "${@:2}"); }

offline "" scripts/get-data.sh >"$TMP/getdata" 2>&1; rc=$?
links=$(find "$R/data/mnist" "$R/data/fashion" -type l | wc -l)
check "get-data.sh accepts the bundled copies without apt or npm (and leaves them as they are)" \
  "exit $rc, $links symlinks: $(tail -c 300 "$TMP/getdata")" \
  [ $rc -eq 0 ] && [ "$links" -eq 0 ] && grep -q "Fashion-MNIST already" "$TMP/getdata" && grep -q "MNIST already" "$TMP/getdata"

# ---- gpu-check without nvcc: nvcc named, alone; exit 2; nothing built
offline "" scripts/gpu-check.sh --out "$TMP/o1" >"$TMP/no-nvcc" 2>&1; rc=$?
check "gpu-check without nvcc: exit 2, one 'missing' line, naming nvcc, nothing built" \
  "exit $rc: $(head -c 400 "$TMP/no-nvcc")" \
  [ $rc -eq 2 ] && [ "$(grep -c 'missing:' "$TMP/no-nvcc")" -eq 1 ] && grep -q 'missing: nvcc' "$TMP/no-nvcc" \
  && [ ! -e "$R/cuda/cuda" ] && ! grep -q building "$TMP/no-nvcc"
if [ $HAVE_NVCC = 0 ]; then
  skip "gpu-check reaches the build offline" "no nvcc on this machine (PATH, /usr/local/cuda/bin)"
  finish
fi

# ---- without make (nvcc present): make named, nvcc not blamed
mv "$FAKE/make" "$TMP/make.link"
offline "$NVCC_DIR" scripts/gpu-check.sh --out "$TMP/o2" >"$TMP/no-make" 2>&1; rc=$?
mv "$TMP/make.link" "$FAKE/make"
check "gpu-check without make: exit 2, names make, does not blame nvcc" "exit $rc: $(head -c 400 "$TMP/no-make")" \
  [ $rc -eq 2 ] && grep -q 'missing: make' "$TMP/no-make" && ! grep -q 'nvcc' <(grep 'missing:' "$TMP/no-make")

# ---- a dangling data symlink (unbundled data/ carried): named, exit 2, nothing built
f=$R/data/fashion/t10k-labels-idx1-ubyte.gz
mv "$f" "$TMP/keep.gz" && ln -s /nonexistent/fashion-mnist/t10k-labels-idx1-ubyte.gz "$f"
offline "$NVCC_DIR" scripts/gpu-check.sh --out "$TMP/o3" >"$TMP/dangling" 2>&1; rc=$?
rm -f "$f" && mv "$TMP/keep.gz" "$f"
check "gpu-check with a dangling data symlink: exit 2, the file and its target named, nothing built" \
  "exit $rc: $(head -c 400 "$TMP/dangling")" \
  [ $rc -eq 2 ] && grep -q "t10k-labels-idx1-ubyte.gz: cannot be opened: a symlink to /nonexistent" "$TMP/dangling" \
  && [ ! -e "$R/cuda/cuda" ]

# ---- the bundled data, no apt or npm: preflight, data checks and the build pass
offline "$NVCC_DIR" scripts/gpu-check.sh --out "$TMP/o4" --stop-after build >"$TMP/build" 2>&1; rc=$?
check "gpu-check offline with bundled data: preflight and data pass, cuda/cuda builds (--stop-after build)" \
  "exit $rc: $(tail -c 400 "$TMP/build")" \
  [ $rc -eq 0 ] && grep -q "preflight passed" "$TMP/build" && grep -q "built cuda/cuda and serial/serial" "$TMP/build" \
  && [ -x "$R/cuda/cuda" ] && ! grep -qiE 'apt|npm|make data' "$TMP/o4/gpu-check.log"
if nvidia-smi -L 2>/dev/null | grep -q GPU; then
  skip "gpu-check past the build" "this machine has a GPU (run scripts/gpu-check.sh itself)"
else
  offline "$NVCC_DIR" scripts/gpu-check.sh --out "$TMP/o5" >"$TMP/probe" 2>&1; rc=$?
  check "gpu-check offline past the build: no GPU here, exit 3 at the device probe, no results written" \
    "exit $rc: $(tail -c 400 "$TMP/probe")" \
    [ $rc -eq 3 ] && grep -q "no usable GPU" "$TMP/probe" && [ ! -e "$TMP/o5/summary.csv" ]
fi
finish
