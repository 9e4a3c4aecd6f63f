# plots/curves.gp — training curves of the partrain trainers, two panels:
# train loss vs epoch and test accuracy vs epoch, one line per configuration.
#
# Driven by scripts/plot.sh, which extracts the curves from results/runs.csv:
#   gnuplot -e "index='results/curves-index.dat'; out='plots/curves.png'; src='results/runs.csv'; xstep=1" plots/curves.gp
# xstep (optional): spacing of the epoch tics.
# index: one line per curve, "FILE<TAB>TITLE"; each FILE has whitespace columns
#        epoch train_loss test_acc epoch_seconds (scripts/summarize.py curves).

if (!exists("index")) index = 'results/curves-index.dat'
if (!exists("out")) out = 'plots/curves.png'
if (!exists("src")) src = 'results/runs.csv'

n = int(system(sprintf("grep -c . '%s'", index)))
file(i) = system(sprintf("sed -n '%dp' '%s' | cut -f1", i, index))
name(i) = system(sprintf("sed -n '%dp' '%s' | cut -f2-", i, index))

# pngcairo when this gnuplot has it, the libgd png terminal otherwise
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1500,620 enhanced font "Sans,11" linewidth 1.5
} else {
    set terminal png size 1500,620 font "Sans,11" linewidth 2
}
set output out

set multiplot layout 1,2 title sprintf("partrain training curves — latest run per configuration (%s)", src) noenhanced
set grid lc rgb "#c8c8c8"
set xlabel "epoch"
if (exists("xstep")) { set xtics xstep; set mxtics 1 }
set key top right box opaque noenhanced samplen 2 spacing 1.1 font ",10"

set title "training loss (mean over the epoch's batches)"
set ylabel "cross-entropy loss (nats per sample)"
plot for [i=1:n] file(i) using 1:2 with linespoints lt i pt 7 ps 0.6 title name(i)

set title "test accuracy after each epoch"
set ylabel "test accuracy (%)"
set key bottom right
plot for [i=1:n] file(i) using 1:3 with linespoints lt i pt 7 ps 0.6 title name(i)

unset multiplot
