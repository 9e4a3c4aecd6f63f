#!/usr/bin/env bash
# scripts/plot.sh — draw every partrain figure from the result CSVs alone (`make plots`,
# and run_all.sh's plots step: one way to draw each figure).
#
# Usage: scripts/plot.sh [--results DIR] [--plots DIR] [--only LIST] [--where COL=VAL]...
#   --results DIR   where the CSVs are (default results); the plot data (*.dat) is
#                   written there too
#   --plots DIR     where the PNGs go (default plots; run_all.sh --quick/--smoke: DIR itself)
#   --only LIST     only these figures (comma-separated names below; default all)
#   --where COL=VAL curves only: rows with COL == VAL (repeatable; COL!=VAL excludes),
#                   e.g. --where program=serial
#
# Figures, one plot_* function each, each from its CSV(s) in --results:
#   curves          runs.csv -> curves.png: train loss and test accuracy vs epoch, one line
#                   per configuration (the latest row of each), via scripts/summarize.py
#                   curves and plots/curves.gp
#   openmp-threads  openmp.csv -> openmp-threads.png: openmp/openmp's thread sweep, epoch
#                   time and speedup vs threads per --accum mode (scripts/openmp_sweep.py,
#                   plots/openmp.gp)
#   mpi-scaling     mpi-strong.csv, mpi-weak.csv -> mpi-scaling.png (epoch time, speedup,
#                   efficiency vs ranks) and mpi-comm.png (share of the epoch inside MPI)
#                   (scripts/mpi_scaling.py, plots/mpi-scaling.gp, plots/mpi-comm.gp)
#   hybrid-grid     hybrid-grid.csv -> hybrid-grid.png: heat maps of epoch time and speedup
#                   over P ranks x T threads, the latest row per cell
#                   (scripts/bench_tables.py hybrid-grid, plots/hybrid.gp)
#   cnn-speedup     cnn-timing.csv (+ cnn-accuracy.csv) -> cnn-speedup.png: seed report
#                   003's speedup-vs-cores figure (scripts/cnn_tables.py, which also
#                   rewrites cnn-table{3,4,5}.md from the same CSVs; plots/cnn-speedup.gp)
#   imagesize       imagesize.csv -> imagesize.png: epoch time and speedup vs input size,
#                   seed report 002's figure 5 (scripts/imagesize.py, plots/imagesize.gp)
#   headline        the sweeps' CSVs -> headline.png: the report's first figure, speedup
#                   against workers for every strategy family with the ideal line and the
#                   per-round core bound where measured (scripts/headline.py, plots/headline.gp)
#   model           model-runs.csv (+ comm.csv) -> model.png: the alpha-beta model's
#                   projection to 1 ... 1024 nodes (scripts/model.py project writes the
#                   model-*.dat, plots/model.gp draws them)
#   tta             tta.csv -> tta.png: epochs and seconds to the target accuracy vs the
#                   global batch, serial and the best strategy (median, min-max over seeds;
#                   not reached: a marker at the cap), and the per-epoch speedup beside
#                   (scripts/tta_sweep.py dat writes tta.dat from it and tta-diverged.txt,
#                   plots/tta.gp draws it)
#   timelines       traces/NAME.json (run_all.sh's timelines step: one --trace run per
#                   strategy) -> timeline-NAME.png: a typical step of each as a Gantt
#                   figure, one row per rank x thread (scripts/timeline.py)
# The titles' core and node counts are the ones the run assumed: DIR/machine.json
# (run_all.sh writes it; --cores N, a hostfile or Slurm may differ from this machine),
# else nproc; the MPI figures count the rank slots (several nodes: their sum).
# A figure whose CSV is missing or has no usable rows is skipped with a line
#   plot: skipped NAME.png: REASON
# The scripts run with $PARTRAIN_PYTHON (scripts/lib.sh; python3 when that is missing).
# Exit status: 0; 1 when gnuplot or python3 is missing or a figure failed (the others are
# still drawn); 2 on a usage error.
export LC_ALL=C   # numbers in awk, printf and sort: a '.' whatever the caller's locale
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

. scripts/lib.sh    # PARTRAIN_PYTHON
FIGURES=(curves openmp-threads mpi-scaling hybrid-grid cnn-speedup imagesize model tta timelines headline)
results=results plots=plots only=""
where=()
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --results) [ $# -ge 2 ] || { echo "plot: --results needs a value" >&2; exit 2; }; results=$2; shift 2 ;;
    --plots)   [ $# -ge 2 ] || { echo "plot: --plots needs a value" >&2; exit 2; }; plots=$2; shift 2 ;;
    --only)    [ $# -ge 2 ] || { echo "plot: --only needs a value" >&2; exit 2; }; only=$2; shift 2 ;;
    --where)   [ $# -ge 2 ] || { echo "plot: --where needs a value" >&2; exit 2; }; where+=(--where "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "plot: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
wanted=("${FIGURES[@]}")
if [ -n "$only" ]; then
  IFS=, read -r -a wanted <<<"$only"
  for f in "${wanted[@]}"; do
    [[ " ${FIGURES[*]} mpi-comm " == *" $f "* ]] || { echo "plot: --only: unknown figure '$f' (${FIGURES[*]})" >&2; exit 2; }
  done
fi
command -v gnuplot >/dev/null || { echo "plot: gnuplot missing (apt-get install gnuplot-nox)" >&2; exit 1; }
[ -x "$PY" ] || PY=python3
mkdir -p "$plots" || exit 1
# the run's cores, nodes and rank slots (DIR/machine.json), else this machine's cores
mj() { sed -n "s/.*\"$1\": *\([0-9][0-9]*\).*/\1/p" "$results/machine.json" 2>/dev/null | head -n 1; }
cores=$(mj cores); nodes=$(mj nodes); slots=$(mj slots); real_cores=$(mj real_cores)
[ -n "$cores" ] || cores=$(nproc)
[ -n "$real_cores" ] || real_cores=$(nproc)   # the machine that ran: OMP_WAIT_POLICY=passive above it
[ -n "$nodes" ] || nodes=1
[ -n "$slots" ] || slots=$cores

skipped() { echo "plot: skipped $1: $2"; }
drawn() { echo "plot: $*"; }

plot_curves() {
  local csv=$results/runs.csv out=$plots/curves.png n maxep xstep
  [ -s "$csv" ] || { skipped curves.png "$csv missing or empty (run_all.sh --only serial)"; return 0; }
  # the curves-*.dat next to the CSV are regenerated each time
  if ! n=$("$PY" scripts/summarize.py curves "$csv" --outdir "$results" "${where[@]}") || [ "$n" -eq 0 ]; then
    skipped curves.png "no curves in $csv${where:+ matching ${where[*]}}"
    return 0
  fi
  # integer epoch tics: every epoch up to 20, else about 10 tics
  maxep=$(awk '!/^#/ && $1 > m { m = $1 } END { print m + 0 }' "$results"/curves-[0-9]*.dat)
  xstep=$(( maxep <= 20 ? 1 : (maxep + 9) / 10 ))
  gnuplot -e "index='$results/curves-index.dat'; out='$out'; src='$csv'; xstep=$xstep" plots/curves.gp || return 1
  drawn "$out ($n curve(s) from $csv)"
}

plot_openmp_threads() {
  local csv=$results/openmp.csv out=$plots/openmp-threads.png vars
  [ -s "$csv" ] || { skipped openmp-threads.png "$csv missing or empty (run_all.sh --only openmp)"; return 0; }
  vars=$("$PY" scripts/openmp_sweep.py "$csv" --outdir "$results")
  case $? in 0) ;; 1) skipped openmp-threads.png "no openmp rows in $csv"; return 0 ;; *) return 1 ;; esac
  local openmp_n serial cores openmp_title
  eval "$vars"   # openmp_n=N serial=S cores=C openmp_title='...' (from our own script)
  gnuplot -e "index='$results/openmp-index.dat'; out='$out'; serial=$serial; cores=$cores; real_cores=$real_cores; subtitle='$openmp_title'" plots/openmp.gp || return 1
  drawn "$out ($openmp_n mode(s) from $csv)"
}

plot_mpi_scaling() {
  local strong=$results/mpi-strong.csv weak=$results/mpi-weak.csv vars
  if [ ! -s "$strong" ] && [ ! -s "$weak" ]; then
    skipped "mpi-scaling.png, mpi-comm.png" "$strong and $weak missing or empty (run_all.sh --only mpi)"
    return 0
  fi
  vars=$("$PY" scripts/mpi_scaling.py "$strong" "$weak" --outdir "$results") || return 1
  local strong_n weak_n serial strong_title weak_title
  eval "$vars"   # strong_n=N weak_n=N serial=S strong_title='...' weak_title='...' (from our own script)
  local v="strong_index='$results/mpi-strong-index.dat'; weak_index='$results/mpi-weak-index.dat'; cores=$slots; nodes=$nodes"
  v+="; strong_title='$strong_title'; weak_title='$weak_title'"
  gnuplot -e "$v; out='$plots/mpi-scaling.png'; serial=$serial" plots/mpi-scaling.gp || return 1
  gnuplot -e "$v; out='$plots/mpi-comm.png'" plots/mpi-comm.gp || return 1
  drawn "$plots/mpi-scaling.png, $plots/mpi-comm.png ($strong_n strong, $weak_n weak variant(s) from $results/mpi-*.csv)"
}

# the points of the P x T grid: the latest hybrid row per (P, T) and the latest serial row
# (bench/hybrid-grid.sh appends one set per run) -> hybrid-grid.dat "P T epoch_s speedup
# policy"; prints the figure's title
plot_hybrid_grid() {
  local csv=$results/hybrid-grid.csv out=$plots/hybrid-grid.png dat=$results/hybrid-grid.dat title
  [ -s "$csv" ] || { skipped hybrid-grid.png "$csv missing or empty (run_all.sh --only hybrid)"; return 0; }
  title=$("$PY" scripts/bench_tables.py hybrid-grid "$csv" --dat "$dat" --cores "$cores")
  case $? in 0) ;; 1) skipped hybrid-grid.png "no hybrid and serial rows in $csv"; return 0 ;; *) return 1 ;; esac
  gnuplot -e "dat='$dat'; out='$out'; title='$title'" plots/hybrid.gp || return 1
  drawn "$out ($(grep -c . "$dat") cell(s) from $csv)"
}

plot_cnn_speedup() {
  local timing=$results/cnn-timing.csv acc=$results/cnn-accuracy.csv out=$plots/cnn-speedup.png dat=$results/cnn-speedup.dat
  [ -s "$timing" ] || { skipped cnn-speedup.png "$timing missing or empty (run_all.sh --only cnn)"; return 0; }
  [ -s "$acc" ] || acc=/dev/null
  "$PY" scripts/cnn_tables.py --accuracy "$acc" --timing "$timing" --outdir "$results" --dat "$dat" --cores "$cores" >/dev/null
  case $? in 0) ;; 1) skipped cnn-speedup.png "no cnn rows in $timing"; return 0 ;; *) return 1 ;; esac
  local epochs
  epochs=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "epochs") c = i; next } { e = $c } END { print e + 0 }' "$timing")
  gnuplot -e "dat='$dat'; out='$out'; src='$timing'; epochs=$epochs; cores=$cores" plots/cnn-speedup.gp || return 1
  drawn "$out (from $timing)"
}

plot_imagesize() {
  local csv=$results/imagesize.csv out=$plots/imagesize.png vars
  [ -s "$csv" ] || { skipped imagesize.png "$csv missing or empty (run_all.sh --only imagesize)"; return 0; }
  vars=$("$PY" scripts/imagesize.py "$csv" --outdir "$results")
  case $? in 0) ;; 1) skipped imagesize.png "no usable rows in $csv"; return 0 ;; *) return 1 ;; esac
  local imagesize_n imagesize_title
  eval "$vars"   # imagesize_n=N imagesize_title='...' (from our own script)
  gnuplot -e "index='$results/imagesize-index.dat'; out='$out'; cores=$cores; subtitle='$imagesize_title'" plots/imagesize.gp || return 1
  drawn "$out ($imagesize_n program configuration(s) from $csv)"
}

plot_model() {
  local runs=$results/model-runs.csv comm=$results/comm.csv out=$plots/model.png sub
  [ -s "$runs" ] || { skipped model.png "$runs missing or empty (bench/model-runs.sh)"; return 0; }
  "$PY" scripts/model.py project --runs "$runs" --comm "$comm" --outdir "$results" >/dev/null || return 1
  sub="a node = 64 cores at the per-core rate of $runs"
  [ -s "$comm" ] && sub+="; shared memory from $comm" || sub+="; $comm missing: stated shared-memory alpha, beta"
  gnuplot -e "dir='$results'; out='$out'; subtitle='$sub'" plots/model.gp || return 1
  drawn "$out (from $runs)"
}

plot_tta() {
  local csv=$results/tta.csv out=$plots/tta.png vars
  [ -s "$csv" ] || { skipped tta.png "$csv missing or empty (run_all.sh --only tta)"; return 0; }
  vars=$("$PY" scripts/tta_sweep.py dat "$csv" "$results/tta.dat" "$results/tta-diverged.txt")
  case $? in 0) ;; 1) skipped tta.png "no usable rows in $csv"; return 0 ;; *) return 1 ;; esac
  local tta_n tta_best tta_target tta_unreached tta_partial
  eval "$vars"   # tta_n=N tta_best='...' tta_target='...' tta_unreached='S B' tta_partial='S B' (our own script's)
  gnuplot -e "dat='$results/tta.dat'; out='$out'; best='$tta_best'; target='$tta_target'; unreached_serial=${tta_unreached% *}; unreached_best=${tta_unreached#* }; partial_serial=${tta_partial% *}; partial_best=${tta_partial#* }; subtitle='$cores cores, $(basename "$csv")'" \
    plots/tta.gp || return 1
  drawn "$out ($tta_n batch(es) from $csv)"
}

plot_timelines() {
  local t n=0 rc=0
  for t in "$results"/traces/*.json; do
    [ -f "$t" ] || continue
    "$PY" scripts/timeline.py "$t" --out "$plots/timeline-$(basename "$t" .json).png" | sed 's/^timeline.py: /plot: /' || rc=1
    n=$((n + 1))
  done
  [ $n -gt 0 ] || skipped "timeline-*.png" "no $results/traces/*.json (run_all.sh --only trace)"
  return $rc
}

plot_headline() {
  local vars
  vars=$("$PY" scripts/headline.py "$results" --outdir "$results")
  case $? in 0) ;; 1) skipped headline.png "no sweep with a serial baseline in $results (openmp.csv, mpi-strong.csv, hybrid-grid.csv, cnn-timing.csv)"; return 0 ;; *) return 1 ;; esac
  local headline_families headline_batch headline_max headline_bounds
  eval "$vars"   # headline_families='...' headline_batch='...' headline_max=N headline_bounds=0|1 (from our own script)
  gnuplot -e "dir='$results'; families='$headline_families'; batch='$headline_batch'; top=$headline_max; bounds=$headline_bounds; cores=$cores; out='$plots/headline.png'" plots/headline.gp || return 1
  drawn "$plots/headline.png ($headline_families from $results)"
}

status=0
for f in "${wanted[@]}"; do
  [ "$f" = mpi-comm ] && f=mpi-scaling
  fn=plot_${f//-/_}
  "$fn" || { echo "plot: FAILED to draw $f (see the messages above)" >&2; status=1; }
done
exit $status
