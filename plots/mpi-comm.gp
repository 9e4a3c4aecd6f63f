# plots/mpi-comm.gp — share of the epoch spent inside MPI calls (comm_seconds /
# epoch_seconds_median), per --sync variant, vs ranks P, for the strong and the weak
# sweep. For overlap this is the communication left exposed.
#
# Driven by scripts/plot.sh with the same index files as plots/mpi-scaling.gp:
#   gnuplot -e "strong_index='...'; weak_index='...'; out='plots/mpi-comm.png'; cores=C" plots/mpi-comm.gp

if (!exists("strong_index")) strong_index = 'results/mpi-strong-index.dat'
if (!exists("weak_index")) weak_index = 'results/mpi-weak-index.dat'
if (!exists("out")) out = 'plots/mpi-comm.png'
if (!exists("nodes")) nodes = 1
if (!exists("cores")) cores = int(system("nproc"))   # scripts/plot.sh passes the run's (machine.json)
if (!exists("strong_title")) strong_title = ''
if (!exists("weak_title")) weak_title = ''

count(idx) = int(system(sprintf("grep -c . '%s' 2>/dev/null || true", idx)))
field(idx, i, f) = system(sprintf("sed -n '%dp' '%s' | cut -f%d", i, idx, f))
ns = count(strong_index)
nw = count(weak_index)

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1500,620 enhanced font "Sans,11" linewidth 1.5
} else {
    set terminal png size 1500,620 font "Sans,11" linewidth 2
}
set output out
set multiplot layout 1,2 title "mpi/mpi: share of the training epoch inside MPI calls (mean over ranks)" noenhanced
set grid lc rgb "#c8c8c8"
set logscale x 2
set xlabel "MPI ranks P"
set xrange [0.8:*]
set ylabel "comm seconds / epoch seconds (%)"
set yrange [0:100]
set key top left box opaque noenhanced samplen 2 font ",10"
set arrow 1 from cores, graph 0 to cores, graph 1 nohead dt 3 lc rgb "#888888"
set label 1 "cores" at cores, graph 0.96 offset 0.5,0 tc rgb "#888888"

set title "strong scaling\n".strong_title noenhanced
if (ns > 0) {
    plot for [i=1:ns] field(strong_index, i, 1) using 1:5 with linespoints lt i pt 7 ps 0.8 title field(strong_index, i, 2)
} else { set label 9 "no strong-scaling data (bench/mpi-sweep.sh)" at graph 0.5, graph 0.5 center; plot NaN notitle; unset label 9 }
set title "weak scaling\n".weak_title noenhanced
if (nw > 0) {
    plot for [i=1:nw] field(weak_index, i, 1) using 1:5 with linespoints lt i pt 7 ps 0.8 title field(weak_index, i, 2)
} else { set label 9 "no weak-scaling data (bench/mpi-sweep.sh)" at graph 0.5, graph 0.5 center; plot NaN notitle; unset label 9 }
unset multiplot
