# plots/model.gp — scripts/model.py's projection: one exchange of the MLP's gradient vs nodes
# per algorithm (α-β, Thakur, Rabenseifner & Gropp 2005), the same vs message size at 16
# nodes, and the global batch that keeps 80 % efficiency.
#
# Driven by scripts/plot.sh (`make plots`), which first runs scripts/model.py project --outdir:
#   gnuplot -e "dir='results'; out='plots/model.png'" plots/model.gp
# Reads DIR/model-projection.dat (nodes, then µs per exchange, then the batch; "-" none) and
# DIR/model-sizes.dat (bytes, then µs per algorithm). Legends sit below each plot, never on a
# curve; axes are labelled 10^k; titles name no file.

if (!exists("dir")) dir = 'results'
if (!exists("out")) out = 'plots/model.png'
proj = dir.'/model-projection.dat'
sizes = dir.'/model-sizes.dat'

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1500,650 enhanced font "Sans,11" linewidth 1.5
} else {
    set terminal png size 1500,650 enhanced font "Sans,11" linewidth 2
}
set output out
set multiplot layout 1,3 title "alpha-beta model: 940,608-byte gradient, alpha 2 us, 100 Gbit/s, 64 ranks per node"
set grid lc rgb "#c8c8c8"
set datafile missing "-"
set key below box samplen 2 font ",9" maxrows 4 spacing 0.9
set bmargin 9
set logscale xy
set format x "10^{%L}"
set format y "10^{%L}"

set title "one exchange vs nodes"
set xlabel "nodes"
set ylabel "microseconds"
plot proj u 1:2 w lp pt 7 ps 0.6 t "ring", '' u 1:3 w lp pt 5 ps 0.6 t "recursive doubling", \
     '' u 1:4 w lp pt 9 ps 0.8 t "Rabenseifner", '' u 1:5 w lp pt 11 ps 0.6 dt 2 t "reduce+bcast (2x rec. doubling)", \
     '' u 1:6 w lp pt 13 ps 0.6 t "hierarchical, 64 ranks/node", '' u 1:7 w lp pt 3 ps 0.6 t "best flat, link shared"

set title "one exchange vs message size, 16 nodes"
set xlabel "bytes"
plot sizes u 1:2 w lp pt 7 ps 0.5 t "ring", '' u 1:3 w lp pt 5 ps 0.5 t "recursive doubling", \
     '' u 1:4 w lp pt 9 ps 0.6 t "Rabenseifner", '' u 1:5 w lp pt 11 ps 0.5 dt 2 t "reduce+bcast"

set title "global batch for 80 % efficiency"
set xlabel "nodes"
set ylabel "samples"
plot proj u 1:8 w lp pt 7 ps 0.6 t "against the faster 64-rank exchange"
unset multiplot
