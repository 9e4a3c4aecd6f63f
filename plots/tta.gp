# plots/tta.gp — time to accuracy against the global batch (bench/tta-sweep.sh):
# epochs to the target, seconds to the target (serial and the best strategy at C cores,
# median with min-max bars over the seeds that reached it) and, beside them, the
# per-epoch speedup of the strategy over serial at each batch. A side that reached the
# target with no seed at a batch is an open marker at the cap (epochs) or at its run time
# (seconds; a run that diverged has no row and no time: only its epochs marker), labelled
# "not reached": never a zero; one that some seeds reached is the
# median of those, labelled "k/n reached".
#
# Driven by scripts/plot.sh (plot_tta), which writes the data with scripts/tta_sweep.py dat:
#   gnuplot -e "dat='results/tta.dat'; out='plots/tta.png'; best='mpi allreduce P=2'; \
#               target='84'; subtitle='...'" plots/tta.gp
# unreached_*, partial_* (counts per side, from the same script): the marker and label
# layers are drawn only when they have points (gnuplot 5.4 can crash on a labels layer
# whose points are all missing).
# dat columns: 1 batch; serial 2-4 epochs med min max, 5-7 seconds med min max, 8 cap,
# 9 run time when not reached; best 10-17 the same; 18 per-epoch speedup; 19, 20 the
# reached counts; 21 runs per side; 22 the cap where a side reached it with no seed.

if (!exists("dat")) dat = 'results/tta.dat'
if (!exists("out")) out = 'plots/tta.png'
if (!exists("best")) best = 'best strategy'
if (!exists("target")) target = '?'
if (!exists("subtitle")) subtitle = ''
# batches where serial (the strategy) reached the target with no seed, with some seeds
if (!exists("unreached_serial")) unreached_serial = 1
if (!exists("unreached_best")) unreached_best = 1
if (!exists("partial_serial")) partial_serial = 1
if (!exists("partial_best")) partial_best = 1
set datafile missing "?"

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1800,660 enhanced font "Sans,11" linewidth 1.5
} else {
    set terminal png size 1800,660 font "Sans,11" linewidth 2
}
set output out
set multiplot layout 1,3 title sprintf("Time to %s %% test accuracy vs global batch — %s", target, subtitle) noenhanced
set grid lc rgb "#c8c8c8"
set logscale x 2
set format x "%.0f"
stats dat using 1 nooutput   # every batch in every panel, a side with no numbers there too
set xrange [STATS_min / 1.4 : STATS_max * 1.4]
set offsets 0, 0, graph 0.12, 0
set xlabel "global batch (log2)"
set key below box noenhanced samplen 2 font ",10" maxrows 2   # below: the cap markers are at the top
set bmargin 9
S = "serial (1 core)"
B = best
NR = "not reached (at the cap)"

# each panel: its plot command built as a string, the marker and label layers added only
# when they have points
set title "epochs to target (median, min-max over seeds)"
set ylabel "epochs"
set yrange [0:*]
cmd = 'plot dat using 1:2:3:4 with yerrorlines lc rgb "#1f77b4" pt 7 title S, ' . \
      'dat using ($1*1.06):10:11:12 with yerrorlines lc rgb "#d62728" pt 5 title B'
if (unreached_serial > 0) cmd = cmd . ', dat using 1:8 with points lc rgb "#1f77b4" pt 6 ps 2 title "serial ".NR'
if (unreached_best > 0) cmd = cmd . ', dat using ($1*1.06):16 with points lc rgb "#d62728" pt 4 ps 2 title "best ".NR'
if (unreached_serial + unreached_best > 0) cmd = cmd . \
      ', dat using 1:22:("not reached") with labels offset 0,1.2 font ",9" notitle'
if (partial_best > 0) cmd = cmd . \
      ', dat using ($1*1.06):(($20 > 0 && $20 < $21) ? $10 : NaN):(sprintf("%d/%d reached", $20, $21)) with labels offset 0,-1.2 font ",9" tc rgb "#d62728" notitle'
if (partial_serial > 0) cmd = cmd . \
      ', dat using 1:(($19 > 0 && $19 < $21) ? $2 : NaN):(sprintf("%d/%d reached", $19, $21)) with labels offset 0,1.2 font ",9" tc rgb "#1f77b4" notitle'
eval cmd

set title "seconds to target (median, min-max over seeds)"
set ylabel "seconds (log scale)"
set logscale y
set yrange [*:*]
set offsets 0, 0, 0, 0
set format y "%g"
cmd = 'plot dat using 1:5:6:7 with yerrorlines lc rgb "#1f77b4" pt 7 title S, ' . \
      'dat using ($1*1.06):13:14:15 with yerrorlines lc rgb "#d62728" pt 5 title B'
if (unreached_serial > 0) cmd = cmd . ', dat using 1:9 with points lc rgb "#1f77b4" pt 6 ps 2 title "serial ".NR." (its run time)"'
if (unreached_best > 0) cmd = cmd . ', dat using ($1*1.06):17 with points lc rgb "#d62728" pt 4 ps 2 title "best ".NR." (its run time)"'
if (partial_best > 0) cmd = cmd . \
      ', dat using ($1*1.06):(($20 > 0 && $20 < $21) ? $13 : NaN):(sprintf("%d/%d reached", $20, $21)) with labels offset 0,-1.2 font ",9" tc rgb "#d62728" notitle'
if (partial_serial > 0) cmd = cmd . \
      ', dat using 1:(($19 > 0 && $19 < $21) ? $5 : NaN):(sprintf("%d/%d reached", $19, $21)) with labels offset 0,1.2 font ",9" tc rgb "#1f77b4" notitle'
eval cmd
unset logscale y

set title "per-epoch speedup of the best strategy over serial"
set ylabel "serial epoch time / its epoch time"
set yrange [0:*]
set offsets 0, 0, graph 0.12, 0
plot dat using 1:18 with linespoints lc rgb "#2ca02c" pt 7 title B, \
     dat using 1:18:(sprintf("%.2fx", $18)) with labels offset 0,1 font ",9" notitle, \
     1 with lines dt 3 lc rgb "#888888" title "serial"

unset multiplot
