# Time-to-acquire under contention as a CDF, one curve per client, from
# prepare.py cdf's files in `dir`; written to `out`. A log time axis: the
# clients' waits differ by orders of magnitude (a queued hand-off against
# polling every 100-200 ms).
set terminal svg size 800,460 dynamic enhanced font "sans,12" background rgb "white"
set output out
set title "Time to acquire one key under contention (4 processes, GET/SET inside)"
set xlabel "time to acquire (ms, log scale)"
set ylabel "acquisitions at most this long"
set logscale x
set format x "%g"
# The fraction on a scale of nines, -log10(1 - F): the tail, where a lock
# that lets its releaser take it back starves the others, gets as much room
# as the median.
nines(f) = -log10(1 - f)
set yrange [0:nines(0.9999)]
set ytics ("0 %%" 0, "50 %%" nines(0.5), "90 %%" 1, "99 %%" 2, "99.9 %%" 3, "99.99 %%" 4)
set grid xtics ytics mxtics
set key left top
clients = system("wc -l < " . dir . "/cdf.clients") + 0
name(n) = system(sprintf("sed -n %dp %s/cdf.clients", n + 1, dir))
plot for [n = 0:clients - 1] sprintf("%s/cdf-%d.dat", dir, n) using 1:(nines($2)) with steps linewidth 2 title name(n)
