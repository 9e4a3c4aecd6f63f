# plots/mpi-scaling.gp — strong and weak scaling of mpi/mpi, one line per --sync variant:
# epoch time and speedup vs serial (strong), epoch time and efficiency (weak), vs ranks P.
#
# Driven by scripts/plot.sh, which extracts the points from the sweep CSVs
# (scripts/mpi_scaling.py; bench/mpi-sweep.sh writes them):
#   gnuplot -e "strong_index='results/mpi-strong-index.dat'; weak_index='results/mpi-weak-index.dat'; \
#               out='plots/mpi-scaling.png'; serial=0.56; cores=C; nodes=N; strong_title='...'; weak_title='...'" plots/mpi-scaling.gp
# Each index has one line per variant, "FILE<TAB>VARIANT"; strong files have columns
# P epoch_s speedup comm_s comm_pct, weak files P epoch_s efficiency comm_s comm_pct train_n.
# An empty index leaves its two panels with a "no data" label.

if (!exists("strong_index")) strong_index = 'results/mpi-strong-index.dat'
if (!exists("weak_index")) weak_index = 'results/mpi-weak-index.dat'
if (!exists("out")) out = 'plots/mpi-scaling.png'
if (!exists("serial")) serial = NaN
if (!exists("nodes")) nodes = 1
if (!exists("cores")) cores = int(system("nproc"))   # scripts/plot.sh passes the run's (machine.json)
if (!exists("strong_title")) strong_title = ''
if (!exists("weak_title")) weak_title = ''

count(idx) = int(system(sprintf("grep -c . '%s' 2>/dev/null || true", idx)))
field(idx, i, f) = system(sprintf("sed -n '%dp' '%s' | cut -f%d", i, idx, f))
ns = count(strong_index)
nw = count(weak_index)

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1500,1100 enhanced font "Sans,11" linewidth 1.5
} else {
    set terminal png size 1500,1100 font "Sans,11" linewidth 2
}
set output out
set multiplot layout 2,2 title sprintf("mpi/mpi scaling on %d cores%s (P > %d: oversubscribed, ranks share cores)", cores, (nodes > 1 ? sprintf(" of %d nodes", nodes) : ""), cores) noenhanced
set grid lc rgb "#c8c8c8"
set logscale x 2
set xlabel "MPI ranks P"
set xrange [0.8:*]
set key top left box opaque noenhanced samplen 2 font ",10"
set arrow 1 from cores, graph 0 to cores, graph 1 nohead dt 3 lc rgb "#888888"
set label 1 "cores" at cores, graph 0.96 offset 0.5,0 tc rgb "#888888"

set title "strong scaling: epoch time\n".strong_title noenhanced
set ylabel "training time per epoch (s)"
set yrange [0:*]
if (ns > 0) {
    plot for [i=1:ns] field(strong_index, i, 1) using 1:2 with linespoints lt i pt 7 ps 0.8 title field(strong_index, i, 2), \
         serial with lines dt 2 lc rgb "black" title "serial/serial"
} else { set label 9 "no strong-scaling data (bench/mpi-sweep.sh)" at graph 0.5, graph 0.5 center; plot NaN notitle; unset label 9 }

set title "strong scaling: speedup over serial/serial"
set ylabel "serial epoch time / epoch time"
if (ns > 0) {
    plot for [i=1:ns] field(strong_index, i, 1) using 1:3 with linespoints lt i pt 7 ps 0.8 title field(strong_index, i, 2), \
         x with lines dt 2 lc rgb "black" title "ideal (P)", \
         (x < cores ? x : cores) with lines dt 3 lc rgb "#888888" title "ideal on these cores"
} else { set label 9 "no strong-scaling data" at graph 0.5, graph 0.5 center; plot NaN notitle; unset label 9 }

set title "weak scaling: epoch time (constant work per rank)\n".weak_title noenhanced
set ylabel "training time per epoch (s)"
if (nw > 0) {
    plot for [i=1:nw] field(weak_index, i, 1) using 1:2 with linespoints lt i pt 7 ps 0.8 title field(weak_index, i, 2)
} else { set label 9 "no weak-scaling data (bench/mpi-sweep.sh)" at graph 0.5, graph 0.5 center; plot NaN notitle; unset label 9 }

set title "weak scaling: efficiency"
set ylabel "epoch time at P = 1 / epoch time at P"
set yrange [0:1.2]
if (nw > 0) {
    plot for [i=1:nw] field(weak_index, i, 1) using 1:3 with linespoints lt i pt 7 ps 0.8 title field(weak_index, i, 2), \
         1 with lines dt 2 lc rgb "black" title "ideal", \
         (x <= cores ? 1 : cores / x) with lines dt 3 lc rgb "#888888" title "ideal on these cores"
} else { set label 9 "no weak-scaling data" at graph 0.5, graph 0.5 center; plot NaN notitle; unset label 9 }
unset multiplot
