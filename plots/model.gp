# plots/model.gp — the alpha-beta model's projection (scripts/model.py project): efficiency
# vs nodes per global batch and per link, one gradient exchange vs message size per
# algorithm, and the global batch that keeps 80 % efficiency.
#
# Driven by scripts/plot.sh (`make plots`), which first runs scripts/model.py project:
#   gnuplot -e "dir='results'; out='plots/model.png'; subtitle='...'" plots/model.gp
# Reads DIR/model-eff-batch.dat and DIR/model-eff-link.dat (one gnuplot index block per
# line, titles one a line in the matching *-index.dat), DIR/model-algos.dat (bytes, then
# seconds per algorithm) and DIR/model-batch80.dat (nodes, then the batch per program x
# link; "-" where none reaches 80 %). Their `#` headers name the columns.

if (!exists("dir")) dir = 'results'
if (!exists("out")) out = 'plots/model.png'
if (!exists("subtitle")) subtitle = ''
count(idx) = int(system(sprintf("grep -c . '%s' 2>/dev/null || true", idx)))
title_of(idx, i) = system(sprintf("sed -n '%dp' '%s'", i, idx))
hdr(f) = system(sprintf("sed -n 2p '%s' | sed 's/^# *//'", f))
nb = count(dir.'/model-eff-batch-index.dat')
nl = count(dir.'/model-eff-link-index.dat')
h80 = hdr(dir.'/model-batch80.dat')
halg = hdr(dir.'/model-algos.dat')

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1500,1100 enhanced font "Sans,11" linewidth 1.5
} else {
    set terminal png size 1500,1100 font "Sans,11" linewidth 2
}
set output out
set multiplot layout 2,2 title "alpha-beta model (scripts/model.py, docs/model.md)\n".subtitle noenhanced
set grid lc rgb "#c8c8c8"
set datafile missing "-"
set key bottom left box opaque noenhanced samplen 2 font ",9"

set logscale x 2
set xlabel "nodes P"
set xrange [0.8:1300]
set ylabel "efficiency (1-node epoch / (P x P-node epoch))"
set yrange [0:1.05]
set title "efficiency vs nodes per global batch (100 Gbit/s)"
plot for [i=1:nb] dir.'/model-eff-batch.dat' index (i-1) using 1:4 with linespoints lt i pt 7 ps 0.6 title title_of(dir.'/model-eff-batch-index.dat', i), \
     0.8 with lines dt 2 lc rgb "black" title "80 %"

set title "efficiency vs nodes at global batch 1024, per program and link"
plot for [i=1:nl] dir.'/model-eff-link.dat' index (i-1) using 1:4 with linespoints lt i pt 7 ps 0.6 title title_of(dir.'/model-eff-link-index.dat', i), \
     0.8 with lines dt 2 lc rgb "black" title "80 %"

set title "one gradient exchange vs message size, 16 nodes, 100 Gbit/s"
set logscale xy
set xlabel "bytes per rank"
set ylabel "seconds"
set xrange [*:*]
set yrange [*:*]
set key top left
plot for [c=2:words(halg)] dir.'/model-algos.dat' using 1:c with lines lw 2 lt (c-1) title word(halg, c)

set title "global batch needed for 80 % efficiency"
set logscale xy 2
set xlabel "nodes P"
set ylabel "global batch"
set xrange [1.6:1300]
set yrange [*:*]
plot for [c=2:words(h80)] dir.'/model-batch80.dat' using 1:c with linespoints lt (c-1) pt 7 ps 0.6 title word(h80, c)
unset multiplot
