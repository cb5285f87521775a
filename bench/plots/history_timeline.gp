# The history check's record on a time axis, from prepare.py history's files
# in `dir`; written to `out`. One row per worker (its restarts on the same
# row), Redis' own row below: every hold as a bar (orange if its holder was
# later told it had lost the lock: the excuse for an overlap), overlapping
# holds shaded, each fault a marker on the row it hit, pauses as lines.
set terminal svg size 1000,420 dynamic enhanced font "sans,12" background rgb "white"
set output out
workers = int(system("awk '{ print $1 }' " . dir . "/rows.dat"))
span = real(system("awk '{ print $2 }' " . dir . "/rows.dat"))
set title "History check: who held the lock when, and the faults"
set xlabel "seconds since the driver started"
set xrange [0:span]
set yrange [-0.7:workers + 0.7]
set ytics ("Redis" 0)
do for [w = 1:workers] { set ytics add (sprintf("w%d", w) w) }
set grid xtics
set key outside bottom center horizontal
set style fill solid 0.25 noborder
plot dir . "/overlaps.dat" using (($1 + $2) / 2):(workers / 2.0):(($2 - $1) / 2):(workers / 2.0 + 0.5) \
         with boxxyerror linecolor rgb "#e41a1c" title "holds overlapping", \
     dir . "/holds.dat" using 1:3:($2 - $1):(0):($4 > 0.5 ? 0xff7f00 : 0x377eb8) with vectors nohead linewidth 9 \
         linecolor rgb variable title "hold (blue; orange: holder told it lost the lock)", \
     dir . "/pauses.dat" using 1:3:($2 - $1):(0) with vectors nohead linewidth 2 linecolor rgb "black" \
         title "SIGSTOP / restart until Redis answered", \
     dir . "/faults.dat" using 1:($3 == 0 ? $2 : 1/0) with points pointtype 2 pointsize 1.6 linecolor rgb "#e41a1c" title "SIGKILL of holder", \
     dir . "/faults.dat" using 1:($3 == 1 ? $2 : 1/0) with points pointtype 9 pointsize 1.4 linecolor rgb "#984ea3" title "SIGSTOP of holder", \
     dir . "/faults.dat" using 1:($3 == 2 ? $2 : 1/0) with points pointtype 1 pointsize 1.4 linecolor rgb "#4daf4a" title "CLIENT KILL", \
     dir . "/faults.dat" using 1:($3 == 3 ? $2 : 1/0) with points pointtype 11 pointsize 1.4 linecolor rgb "#984ea3" title "SIGSTOP of Redis", \
     dir . "/faults.dat" using 1:($3 == 4 ? $2 : 1/0) with points pointtype 5 pointsize 1.4 linecolor rgb "#ff7f00" title "Redis restart"
