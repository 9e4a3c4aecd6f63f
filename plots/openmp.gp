# plots/openmp.gp — openmp/openmp's thread sweep: epoch time and speedup over serial/serial
# against the number of threads T, one line per --accum mode (critical, reduction, loop, model).
#
# Driven by scripts/plot.sh (plot_openmp), which extracts the points from the sweep CSV
# (run_all.sh's openmp sweep, results/openmp.csv) with scripts/openmp_sweep.py:
#   gnuplot -e "index='results/openmp-index.dat'; out='plots/openmp-threads.png'; serial=0.57; cores=C; \
#               subtitle='fashion, 60000 samples, batch 64'" plots/openmp.gp
# index: one line per mode, "FILE<TAB>MODE"; each FILE has whitespace columns
#        threads epoch_s speedup_vs_serial sync_s omp_wait_policy.
# T above the core count runs with OMP_WAIT_POLICY=passive (the sweep sets it): the
# right-hand side of the curves is the oversubscription penalty.

if (!exists("index")) index = 'results/openmp-index.dat'
if (!exists("out")) out = 'plots/openmp-threads.png'
if (!exists("serial")) serial = NaN
if (!exists("cores")) cores = int(system("nproc"))   # scripts/plot.sh passes the run's (machine.json)
if (!exists("real_cores")) real_cores = int(system("nproc"))   # the machine that ran (passive above it)
if (!exists("subtitle")) subtitle = ''

n = int(system(sprintf("grep -c . '%s' 2>/dev/null || true", index)))
field(i, f) = system(sprintf("sed -n '%dp' '%s' | cut -f%d", i, index, f))

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1500,620 enhanced font "Sans,11" linewidth 1.5
} else {
    set terminal png size 1500,620 font "Sans,11" linewidth 2
}
set output out
set multiplot layout 1,2 title sprintf("openmp/openmp: threads T on %d cores — %s (T > %d: OMP\\_WAIT\\_POLICY=passive)", cores, subtitle, real_cores)
set grid lc rgb "#c8c8c8"
set logscale x 2
set xlabel "threads T"
set xrange [0.8:*]
set key top left box opaque noenhanced samplen 2 font ",10"
set arrow 1 from cores, graph 0 to cores, graph 1 nohead dt 3 lc rgb "#888888"
set label 1 "cores" at cores, graph 0.96 offset 0.5,0 tc rgb "#888888"

set title "training time per epoch (median of epochs 2..E)"
set ylabel "seconds per epoch"
set yrange [0:*]
if (n > 0) {
    plot for [i=1:n] field(i, 1) using 1:2 with linespoints lt i pt 7 ps 0.8 title field(i, 2), \
         serial with lines dt 2 lc rgb "black" title "serial/serial (1 core)"
} else { set label 9 "no sweep data (run_all.sh --only openmp)" at graph 0.5, graph 0.5 center; plot NaN notitle; unset label 9 }

set title "speedup over serial/serial"
set ylabel "serial epoch time / epoch time"
set key top right
set yrange [0:cores * 1.15]
if (n > 0) {
    plot for [i=1:n] field(i, 1) using 1:3 with linespoints lt i pt 7 ps 0.8 title field(i, 2), \
         (x < cores ? x : cores) with lines dt 3 lc rgb "#888888" title "ideal on these cores", \
         1 with lines dt 2 lc rgb "black" title "serial"
} else { set label 9 "no sweep data" at graph 0.5, graph 0.5 center; plot NaN notitle; unset label 9 }

unset multiplot
