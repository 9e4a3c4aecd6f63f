# plots/imagesize.gp — seed report 002's figure 5 with our trainers: training time per
# epoch and speedup over serial/serial against the input size (images resampled to
# 28x28, 57x57, 112x112: 784, 3249, 12544 inputs), one line per program configuration.
#
# Driven by scripts/plot.sh (plot_imagesize), which extracts the points from run_all.sh's
# image-size sweep (results/imagesize.csv) with scripts/imagesize.py:
#   gnuplot -e "index='results/imagesize-index.dat'; out='plots/imagesize.png'; cores=C; \
#               subtitle='fashion, 10000 training samples, ...'" plots/imagesize.gp
# index: one line per program configuration, "FILE<TAB>TITLE"; each FILE has whitespace
#        columns inputs side epoch_s speedup_vs_serial gflops.

if (!exists("index")) index = 'results/imagesize-index.dat'
if (!exists("out")) out = 'plots/imagesize.png'
if (!exists("cores")) cores = int(system("nproc"))   # scripts/plot.sh passes the run's (machine.json)
if (!exists("subtitle")) subtitle = ''

n = int(system(sprintf("grep -c . '%s' 2>/dev/null || true", index)))
field(i, f) = system(sprintf("sed -n '%dp' '%s' | cut -f%d", i, index, f))

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1500,640 enhanced font "Sans,11" linewidth 1.5
} else {
    set terminal png size 1500,640 font "Sans,11" linewidth 2
}
set output out
set multiplot layout 1,2 title "Training time vs input size (seed report 002, figure 5) — ".subtitle noenhanced
set grid lc rgb "#c8c8c8"
set logscale x 2
set xrange [600:16000]
set xtics ("784\n(28x28)" 784, "3249\n(57x57)" 3249, "12544\n(112x112)" 12544)
set xlabel "inputs per image (pixels; images resampled with --image-size)" offset 0,-0.5
set key top left box opaque noenhanced samplen 2 font ",10"

set title "training time per epoch"
set ylabel "seconds per epoch (log scale)"
set logscale y
set format y "%g"
if (n > 0) {
    plot for [i=1:n] field(i, 1) using 1:3 with linespoints lt i pt 7 ps 1.0 title field(i, 2)
} else { set label 9 "no image-size data (run_all.sh --only imagesize)" at graph 0.5, graph 0.5 center; plot NaN notitle; unset label 9 }

set title sprintf("speedup over serial/serial at the same input size (%d cores)", cores)
set ylabel "serial epoch time / epoch time"
unset logscale y
set yrange [0:*]          # the ideal line keeps at least the core count in view
set offsets 0, 0, 0.3, 0
set key top left
if (n > 0) {
    plot for [i=1:n] field(i, 1) using 1:4 with linespoints lt i pt 7 ps 1.0 title field(i, 2), \
         for [i=2:n] field(i, 1) using 1:4:(sprintf("%.2fx", $4)) with labels offset 2.5,(i % 2 ? -0.8 : 0.8) font ",9" tc lt i notitle, \
         cores with lines dt 3 lc rgb "#888888" title sprintf("ideal on %d cores", cores)
} else { set label 9 "no image-size data" at graph 0.5, graph 0.5 center; plot NaN notitle; unset label 9 }

unset multiplot
