# plots/hybrid.gp — hybrid/hybrid's P x T grid as two heat maps: epoch seconds and
# speedup vs serial, one cell per (ranks P, threads T), each labelled with its value.
#
# Driven by bench/hybrid-grid.sh, which writes the points:
#   gnuplot -e "dat='results/hybrid-grid.dat'; out='plots/hybrid-grid.png'; title='...'" plots/hybrid.gp
# dat columns: P T epoch_s speedup omp_wait_policy (one line per cell; P, T in 1, 2, 4).

if (!exists("dat")) dat = 'results/hybrid-grid.dat'
if (!exists("out")) out = 'plots/hybrid-grid.png'
if (!exists("title")) title = 'hybrid/hybrid: P ranks x T threads'

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1300,560 enhanced font "Sans,11"
} else {
    set terminal png size 1300,560 font "Sans,11"
}
set output out
set multiplot layout 1,2 title title
lg(x) = log(x) / log(2)
set xrange [-0.5:2.5]
set yrange [-0.5:2.5]
set xtics ("1" 0, "2" 1, "4" 2)
set ytics ("1" 0, "2" 1, "4" 2)
set xlabel "OpenMP threads per rank T"
set ylabel "MPI ranks P"
set size ratio 1
set palette defined (0 "#2c7bb6", 1 "#ffffbf", 2 "#d7191c")

set title "training time per epoch (median of epochs 2..E)\nwith the OMP\\_WAIT\\_POLICY of the run"
set cblabel "seconds per epoch"
plot dat using (lg($2)):(lg($1)):3 with image notitle, \
     '' using (lg($2)):(lg($1)):(sprintf("%.3f s\nwait: %s", $3, strcol(5))) with labels notitle

set palette defined (0 "#d7191c", 1 "#ffffbf", 2 "#1a9641")
set title "speedup vs serial/serial (one core)"
set cblabel "speedup (serial epoch time / epoch time)"
plot dat using (lg($2)):(lg($1)):4 with image notitle, \
     '' using (lg($2)):(lg($1)):(sprintf("%.2fx", $4)) with labels notitle
unset multiplot
