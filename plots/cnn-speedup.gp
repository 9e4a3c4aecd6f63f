# plots/cnn-speedup.gp — seed report 003's speedup-vs-cores figure with our numbers:
# speedup of cnn/cnn's 5-epoch training time over its 1 rank x 1 thread run, against
# the cores it used, for more threads (1 x T), more ranks (P x 1) and both (P x T, T > 1
# and P > 1), with the ideal line and the report's own point (4 ranks, 3.56x on an Apple
# M4). cores: the cores the run assumed (scripts/plot.sh: results/DIR/machine.json).
#
# Driven by run_all.sh through scripts/cnn_tables.py, which writes the data file:
#   gnuplot -e "dat='results/cnn-speedup.dat'; out='plots/cnn-speedup.png'; src='results/cnn-timing.csv'; epochs=5; cores=C" plots/cnn-speedup.gp
# dat: gnuplot index blocks (separated by two blank lines), whitespace columns
#      "cores speedup seconds label": 0 threads, 1 ranks, 2 hybrid, 3 the report's.

if (!exists("dat")) dat = 'results/cnn-speedup.dat'
if (!exists("out")) out = 'plots/cnn-speedup.png'
if (!exists("src")) src = 'results/cnn-timing.csv'
if (!exists("epochs")) epochs = 5
if (!exists("cores")) cores = int(system("nproc"))
top = (cores > 4 ? cores : 4) + 0.2

# pngcairo when this gnuplot has it, the libgd png terminal otherwise
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900,620 enhanced font "Sans,11" linewidth 1.5
} else {
    set terminal png size 900,620 font "Sans,11" linewidth 2
}
set output out

set title sprintf("CNN of seed report 003: speedup of %d training epochs (total time) over 1 rank x 1 thread\n%s", epochs, src) noenhanced
set grid lc rgb "#c8c8c8"
set xlabel sprintf("cores used (ranks x threads, at most the %d cores)", cores)
set ylabel "speedup (1x1 time / time)"
set xrange [0.8:top]
set yrange [0:top]
if (top <= 9) set xtics 1
set key top left box opaque noenhanced samplen 2 spacing 1.1 font ",10"

plot x with lines lc rgb "#909090" dt 2 title "ideal (speedup = cores)", \
     dat index 0 using 1:2 with linespoints lt 1 pt 7 ps 1.2 title "ours: 1 rank x T threads (OpenMP)", \
     dat index 1 using 1:2 with linespoints lt 2 pt 5 ps 1.2 title "ours: P ranks x 1 thread (MPI)", \
     dat index 2 using 1:2 with points lt 3 pt 9 ps 1.8 title "ours: P ranks x T threads (passive when oversubscribed)", \
     dat index 3 using 1:2 with linespoints lt 4 pt 13 ps 1.4 title "seed report 003: 4 ranks (Apple M4)", \
     dat index 0 using 1:($1 > 1 ? $2 : NaN):(sprintf("%.2fx", $2)) with labels right offset -1,-0.9 font ",9" tc lt 1 notitle, \
     dat index 1 using 1:($1 > 1 ? $2 : NaN):(sprintf("%.2fx", $2)) with labels left offset 1.5,0 font ",9" tc lt 2 notitle, \
     dat index 2 using 1:2:(sprintf("%.2fx", $2)) with labels left offset 1.5,0 font ",9" tc lt 3 notitle, \
     dat index 3 using 1:($1 > 1 ? $2 : NaN):(sprintf("%.2fx", $2)) with labels offset -3,0 font ",9" notitle
