# Acquisitions per second against threads of one service on one key
# (dlock-bench's contention sweep: the median round, bars from the slowest
# to the fastest), from prepare.py sweep's file in `dir`;
# written to `out`. The p99 time to acquire on the right axis: more threads
# add no throughput to one key, they wait longer in line.
set terminal svg size 800,460 dynamic enhanced font "sans,12" background rgb "white"
set output out
set title "dlock: one key, threads of one process (GET/SET inside)"
set xlabel "threads"
set ylabel "acquisitions per second"
set y2label "time to acquire p99 (ms)"
set logscale x 2
set xtics (1, 2, 4, 8, 16)
set xrange [0.8:20]
set yrange [0:*]
set y2range [0:*]
set ytics nomirror
set y2tics
set grid ytics
set key outside bottom center vertical
plot dir . "/sweep.dat" using 1:2 with lines linewidth 2 linecolor rgb "#377eb8" notitle, \
     dir . "/sweep.dat" using 1:2:3:4 with yerrorbars pointtype 7 linecolor rgb "#377eb8" \
         title "acquisitions per second (median round; bars: slowest and fastest)", \
     dir . "/sweep.dat" using 1:6 axes x1y2 with linespoints linewidth 1 dashtype 2 pointtype 6 linecolor rgb "#ff7f00" title "p99 time to acquire (right axis)"
