#!/usr/bin/env bash
# scripts/plot.sh — regenerate plots/*.png from the result CSVs alone (`make plots`).
#
# Usage: scripts/plot.sh [--csv FILE] [--out PNG] [--where COL=VAL]...
#   --csv FILE      result CSV with the curves (default results/runs.csv)
#   --out PNG       the curves plot (default plots/curves.png)
#   --where COL=VAL only rows with COL == VAL (repeatable; COL!=VAL excludes),
#                   e.g. --where program=serial
#
# plots/curves.png: train loss and test accuracy vs epoch, one line per
# configuration (dataset, program, variant, ranks, threads, size, train_n, hidden,
# activation, batch, lr), the latest row of each. scripts/summarize.py extracts
# the ';'-separated curve columns (by column name) into whitespace-column files
# curves-NN.dat next to the CSV (results/curves-01.dat, ..., listed with their
# legend titles in results/curves-index.dat), and plots/curves.gp draws them.
# More plots (speedups, ...) are added as further plot_* functions below:
# plot_mpi draws plots/mpi-scaling.png and plots/mpi-comm.png (see there);
# plot_openmp draws plots/openmp-threads.png (see there).
#
# A plot whose CSV is missing or has no rows is skipped with a line saying so.
# Exit status: 0; 1 when gnuplot or python3 is missing or gnuplot fails; 2 on a usage error.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY=/usr/bin/python3
csv=results/runs.csv out=plots/curves.png
where=()
while [ $# -gt 0 ]; do
  case "$1" in
    --csv)   [ $# -ge 2 ] || { echo "plot: --csv needs a value" >&2; exit 2; }; csv=$2; shift 2 ;;
    --out)   [ $# -ge 2 ] || { echo "plot: --out needs a value" >&2; exit 2; }; out=$2; shift 2 ;;
    --where) [ $# -ge 2 ] || { echo "plot: --where needs a value" >&2; exit 2; }; where+=(--where "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "plot: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
command -v gnuplot >/dev/null || { echo "plot: gnuplot missing (apt-get install gnuplot-nox)" >&2; exit 1; }
[ -x "$PY" ] || PY=python3

plot_curves() {
  if [ ! -s "$csv" ]; then
    echo "plot: $csv missing or empty; skipped $out"
    return 0
  fi
  local datadir
  datadir=$(dirname "$csv")      # curves-*.dat there are regenerated each time
  local n
  if ! n=$("$PY" scripts/summarize.py curves "$csv" --outdir "$datadir" "${where[@]}") || [ "$n" -eq 0 ]; then
    echo "plot: no curves in $csv${where:+ matching ${where[*]}}; skipped $out"
    return 0
  fi
  mkdir -p "$(dirname "$out")"
  # integer epoch tics: every epoch up to 20, else about 10 tics
  local maxep xstep
  maxep=$(awk '!/^#/ && $1 > m { m = $1 } END { print m + 0 }' "$datadir"/curves-[0-9]*.dat)
  xstep=$(( maxep <= 20 ? 1 : (maxep + 9) / 10 ))
  gnuplot -e "index='$datadir/curves-index.dat'; out='$out'; src='$csv'; xstep=$xstep" plots/curves.gp
  echo "plot: $out ($n curve(s) from $csv)"
}

# plots/mpi-scaling.png and plots/mpi-comm.png (next to --out): the MPI scaling sweeps
# (bench/mpi-sweep.sh) from mpi-strong.csv and mpi-weak.csv next to --csv;
# scripts/mpi_scaling.py writes the points to mpi-{strong,weak}-*.dat there.
plot_mpi() {
  local dir strong weak outdir vars
  dir=$(dirname "$csv"); strong=$dir/mpi-strong.csv; weak=$dir/mpi-weak.csv; outdir=$(dirname "$out")
  if [ ! -s "$strong" ] && [ ! -s "$weak" ]; then
    echo "plot: $strong and $weak missing or empty; skipped $outdir/mpi-scaling.png, $outdir/mpi-comm.png"
    return 0
  fi
  vars=$("$PY" scripts/mpi_scaling.py "$strong" "$weak" --outdir "$dir") || return 1
  local strong_n weak_n serial strong_title weak_title
  eval "$vars"   # strong_n=N weak_n=N serial=S strong_title='...' weak_title='...' (from our own script)
  mkdir -p "$outdir"
  local v="strong_index='$dir/mpi-strong-index.dat'; weak_index='$dir/mpi-weak-index.dat'; cores=$(nproc)"
  v+="; strong_title='$strong_title'; weak_title='$weak_title'"
  gnuplot -e "$v; out='$outdir/mpi-scaling.png'; serial=$serial" plots/mpi-scaling.gp
  gnuplot -e "$v; out='$outdir/mpi-comm.png'" plots/mpi-comm.gp
  echo "plot: $outdir/mpi-scaling.png, $outdir/mpi-comm.png ($strong_n strong, $weak_n weak variant(s) from $dir/mpi-*.csv)"
}

# plots/openmp-threads.png (next to --out): openmp/openmp's thread sweep (run_all.sh's
# openmp step) from openmp.csv next to --csv; scripts/openmp_sweep.py writes the points
# to openmp-*.dat there, plots/openmp.gp draws epoch time and speedup vs threads.
plot_openmp() {
  local dir sweep outdir vars
  dir=$(dirname "$csv"); sweep=$dir/openmp.csv; outdir=$(dirname "$out")
  if [ ! -s "$sweep" ]; then
    echo "plot: $sweep missing or empty; skipped $outdir/openmp-threads.png"
    return 0
  fi
  vars=$("$PY" scripts/openmp_sweep.py "$sweep" --outdir "$dir") || return 1
  local openmp_n serial cores openmp_title
  eval "$vars"   # openmp_n=N serial=S cores=C openmp_title='...' (from our own script)
  mkdir -p "$outdir"
  gnuplot -e "index='$dir/openmp-index.dat'; out='$outdir/openmp-threads.png'; serial=$serial; cores=$cores; subtitle='$openmp_title'" plots/openmp.gp
  echo "plot: $outdir/openmp-threads.png ($openmp_n mode(s) from $sweep)"
}

plot_curves
plot_mpi
plot_openmp
