# plots/headline.gp — the report's headline figure: speedup over serial against workers
# (threads T, ranks P, or P x T) for every strategy family, the fastest configuration at
# each worker count, with the ideal line and, where a benchmark measured it, the per-round
# core bound (dashed).
#
# Driven by scripts/plot.sh (plot_headline), the points from scripts/headline.py:
#   gnuplot -e "dir='results'; families='openmp mpi hybrid'; batch='openmp at batch 64'; top=8; bounds=0; cores=C; out='plots/headline.png'" plots/headline.gp
# each DIR/headline-FAMILY.dat: whitespace columns workers speedup bound ('?' = not measured).

if (!exists("dir")) dir = 'results'
if (!exists("families")) families = 'openmp mpi hybrid cnn'
if (!exists("batch")) batch = 'batch 64'   # which family at which batch
if (!exists("top")) top = 8
if (!exists("bounds")) bounds = 0   # 1: some family has a measured core bound (dashed lines)
if (!exists("cores")) cores = int(system("nproc"))
if (!exists("out")) out = 'plots/headline.png'

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900,600 enhanced font "Sans,11" linewidth 1.5
} else {
    set terminal png size 900,600 font "Sans,11" linewidth 2
}
set output out
set datafile missing '?'
set title sprintf("speedup over serial against workers on %d cores\n{/*0.9 %s}", cores, batch)
set grid lc rgb "#c8c8c8"
set logscale x 2
set logscale y 2
set xlabel "workers (threads T, ranks P, or P × T)"
set ylabel "speedup over serial (same sweep)"
set xrange [0.8:top * 1.25]
set key top left box opaque noenhanced
set arrow 1 from cores, graph 0 to cores, graph 1 nohead dt 3 lc rgb "#888888"
file(f) = sprintf("%s/headline-%s.dat", dir, f)
curves = 'plot x with lines dt 3 lc rgb "#555555" title "ideal (speedup = workers)", ' . \
         'for [i = 1:words(families)] file(word(families, i)) using 1:2 with linespoints pt 7 lc i title word(families, i)'
bound_lines = ', for [i = 1:words(families)] file(word(families, i)) using 1:3 with lines dt 2 lc i title word(families, i) . " core bound"'
eval(curves . (bounds ? bound_lines : ''))
