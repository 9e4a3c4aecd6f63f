#!/usr/bin/env bash
# tests/run-sanitized.sh — the whole suite against the ASan + UBSan build (make test SANITIZE=1
# builds build/sanitize/ first, then runs this; arguments are passed to tests/run.sh).
#
# build/sanitize/ is made a shadow repository root: every top-level entry of the repository
# is a symlink to it (README.md, scripts/, data/, ...), but the program directories
# (serial/, openmp/, mpi/, hybrid/, cnn/, cuda/, bench/) and tests/ are real directories holding
# symlinks to their sources and scripts plus the sanitized binaries (serial/serial, ...,
# tests/bin/*). Every test cds to "$(dirname "$0")/.." and names programs by relative paths,
# so tests/run.sh started there runs the unchanged suite against the sanitized programs.
#
# The sanitizers' settings, exported here and so inherited by every process of a test;
# MPI ranks included: mpirun (scripts/mpirun.sh) starts local ranks with its own
# environment, so no -x is needed:
#   ASAN_OPTIONS,  log_path: every ASan, LeakSanitizer and UBSan report goes to a file in
#   UBSAN_OPTIONS  build/sanitize/reports/ instead of stderr (UBSan's too, because make
#                  SANITIZE=1 links the runtimes statically), and tests/run.sh fails the
#                  test after which such a file appeared (PARTRAIN_SANITIZER_LOGS), even
#                  when the test itself looks at a CSV and not at the exit status. The
#                  programs also stop at the first error (-fno-sanitize-recover=all): exit 1.
#                  fast_unwind_on_malloc=0: whole allocation stacks (OpenMPI has no frame
#                  pointers), which the suppressions below need.
#   LSAN_OPTIONS   suppressions=tests/lsan.supp: what OpenMPI 4.1 still holds at exit (and
#                  one race of the sanitizer runtime); leaks in partrain's code are reported.
#   PARTRAIN_SANITIZE=1  tells the tests that they run sanitized programs: their hang limits
#                  are tripled (SLOWDOWN, tests/lib.sh), and tests/test_portable.sh (a second
#                  optimized build) skips with its reason.
# Tests that set ASAN_OPTIONS themselves (detect_leaks=0 for the sanitized MPI programs)
# replace these settings for their runs; they check the exit status and stderr themselves.
set -u
cd "$(dirname "$0")/.." || exit 2
root=build/sanitize
[ -x $root/serial/serial ] || { echo "run-sanitized: $root/serial/serial missing: make SANITIZE=1 first" >&2; exit 2; }

shopt -s nullglob dotglob
for e in *; do
  case $e in
    .git|build) ;;
    serial|openmp|mpi|hybrid|cnn|cuda|tests|bench)
      [ ! -L "$root/$e" ] || rm -f "$root/$e"   # bench/ was one link before bench/comm was built
      mkdir -p "$root/$e"
      # the sources and scripts, never a native binary (the sanitized ones are there already;
      # bench/'s scripts are executable, its one binary is bench/comm)
      for f in "$e"/*; do
        [ -f "$f" ] || continue
        case $e in tests) ;; bench) [ "$f" != bench/comm ] || continue ;; *) [ -x "$f" ] && continue ;; esac
        [ -e "$root/$f" ] && [ ! -L "$root/$f" ] || ln -sfn "../../../$f" "$root/$f"
      done ;;
    *) ln -sfn "../../$e" "$root/$e" ;;
  esac
done
find "$root" -maxdepth 2 -xtype l -delete   # links to files removed since the last run
shopt -u nullglob dotglob

reports=$PWD/$root/reports
rm -rf "$reports"; mkdir -p "$reports"
export PARTRAIN_SANITIZE=1 PARTRAIN_SANITIZER_LOGS=$reports
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:fast_unwind_on_malloc=0"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0"
cd $root && exec tests/run.sh "$@"
