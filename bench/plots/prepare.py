#!/usr/bin/python3
"""Turns the benchmark's and the history check's records into the plain
columns gnuplot reads (bench/plot.sh calls this, then the .gp scripts).

    prepare.py cdf PEERS.csv OUTDIR         -> OUTDIR/cdf-N.dat per client, OUTDIR/cdf.clients
    prepare.py sweep BENCH.jsonl OUTDIR     -> OUTDIR/sweep.dat
    prepare.py history RECORD_DIR OUTDIR    -> OUTDIR/holds.dat, overlaps.dat, faults.dat, pauses.dat, rows.dat

Exits 1 with a message naming the file and what to do when an input holds
none of the data its plot needs.
"""
import csv
import json
import os
import sys
from collections import defaultdict

CDF_POINTS = 300  # per client, besides the tail: a smooth curve in a committed SVG of modest size


def fail(message):
    sys.exit(f"bench/plot.sh: {message}")


def cdf(peers_csv, out):
    waits = defaultdict(list)
    with open(peers_csv, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != ["client", "wait_us"]:
            fail(f"{peers_csv}: expected the header 'client,wait_us' of bench/peers/contention.sh --out")
        for row in reader:
            waits[row["client"]].append(float(row["wait_us"]))
    if not waits:
        fail(f"{peers_csv}: no acquisitions; run bench/peers/contention.sh --out {peers_csv} again")
    with open(os.path.join(out, "cdf.clients"), "w") as names:
        for n, (client, samples) in enumerate(waits.items()):
            samples.sort()
            count = len(samples)
            # CDF_POINTS evenly spaced ranks, the last the maximum, and every rank of the slowest 2 %:
            # the plot's scale of nines spreads that tail over half its height.
            ranks = {max(0, round(count * (i + 1) / CDF_POINTS) - 1) for i in range(CDF_POINTS)}
            ranks = sorted(ranks | set(range(int(count * 0.98), count)))
            with open(os.path.join(out, f"cdf-{n}.dat"), "w") as f:
                for r in ranks:
                    # ms, and the fraction at most that long by Hazen's plotting position, (rank - 0.5) / count,
                    # which stays below 1 so that the maximum too has a place on the plot's log scale of nines.
                    f.write(f"{samples[r] / 1000:.6f} {(r + 0.5) / count:.8f}\n")
            names.write(f"{client} ({count} acquisitions)\n")


def sweep(bench_jsonl, out):
    runs = {}  # section -> figures
    with open(bench_jsonl) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                figure = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{bench_jsonl}:{number}: not a JSON line ({e}); give the file dlock-bench --json wrote")
            if figure.get("section", "").startswith("contention sweep:"):
                runs.setdefault(figure["section"], {})[figure["name"]] = figure["value"]
    rows = sorted((r["threads"], r["acquisitions per second"],
                   r.get("acquisitions per second, slowest round", r["acquisitions per second"]),
                   r.get("acquisitions per second, fastest round", r["acquisitions per second"]),
                   r["time-to-acquire p50"], r["time-to-acquire p99"])
                  for r in runs.values() if "threads" in r and "acquisitions per second" in r)
    if not rows:
        fail(f"{bench_jsonl}: no 'contention sweep' figures; make it with "
             "dlock-bench --only contention --json FILE (a dlock-bench from this tree)")
    with open(os.path.join(out, "sweep.dat"), "w") as f:
        f.write("# threads acquisitions/s(median round) slowest_round fastest_round p50_ms p99_ms\n")
        for threads, rate, slowest, fastest, p50, p99 in rows:
            f.write(f"{threads:g} {rate:.1f} {slowest:.1f} {fastest:.1f} {p50 / 1000:.4f} {p99 / 1000:.4f}\n")


def read_events(path):
    """The lines of one history file (history/event.hpp's format) as (t_ns, who, pid, kind, fields)."""
    events = []
    with open(path) as f:
        for line in f:
            words = line.split(" text=", 1)[0].split()  # free text runs to the end of the line
            if len(words) < 4 or not words[0].isdigit() or not words[2].isdigit():
                continue  # a torn last line of a killed process
            fields = dict(word.split("=", 1) for word in words[4:] if "=" in word)
            events.append((int(words[0]), words[1], int(words[2]), words[3], fields))
    return events


def history(record, out):
    driver_log = os.path.join(record, "driver.log")
    if not os.path.exists(driver_log):
        fail(f"{record}: no driver.log; give a record directory of scripts/history.sh (build/history-records/seed-N)")
    driver = read_events(driver_log)
    config = [e for e in driver if e[3] == "config"]
    if not config:
        fail(f"{driver_log}: no config line; the record is incomplete, run scripts/history.sh again")
    origin = config[0][0]

    def seconds(t_ns):  # since the driver's config line
        return (t_ns - origin) / 1e9

    workers = sorted((f for f in os.listdir(record) if f.startswith("w") and f.endswith(".log")),
                     key=lambda f: int(f[1:-4]))
    row = {w[:-4]: n + 1 for n, w in enumerate(workers)}  # row 0 is Redis
    deaths = {e[4]["pid"]: e[0] for e in driver if e[3] == "worker-exit" and e[4].get("how") == "kill"}
    deaths.update({e[4]["pid"]: e[0] for e in driver if e[3] == "fault" and e[4].get("kind") == "kill-holder"})

    holds = []  # [grant_ns, end_ns, row, told, pid]
    for name in workers:
        events = read_events(os.path.join(record, name))
        current = None
        for t, who, pid, kind, _ in events:
            if kind == "grant":
                current = [t, None, row[who], 0, pid]
                holds.append(current)
            elif kind == "end" and current and current[1] is None:
                current[1] = t
            elif kind == "lost" and current:
                current[3] = 1  # told before its next lock() call
            elif kind == "invoke":
                current = None
        for h in holds:  # a hold cut short by a kill ends at the death, else at its process' last line
            if h[1] is None and h[2] == row[name[:-4]]:
                h[1] = deaths.get(str(h[4]), max(e[0] for e in events if e[2] == h[4]))
    if not holds:
        fail(f"{record}: no grants in the workers' files; the record is empty, run scripts/history.sh again")
    with open(os.path.join(out, "holds.dat"), "w") as f:
        f.write("# start_s end_s row told\n")
        for start, end, r, told, _ in holds:
            f.write(f"{seconds(start):.6f} {seconds(end):.6f} {r} {told}\n")

    # Overlaps: a hold granted while another process' hold had not ended.
    by_start = sorted(holds)
    with open(os.path.join(out, "overlaps.dat"), "w") as f:
        f.write("# start_s end_s\n")
        for i, a in enumerate(by_start):
            for b in by_start[i + 1:]:
                if b[0] >= a[1]:
                    break
                if b[4] != a[4]:
                    f.write(f"{seconds(b[0]):.6f} {seconds(min(a[1], b[1])):.6f}\n")

    kinds = ["kill-holder", "stop-holder", "client-kill", "stop-redis", "restart-redis"]
    faults = [e for e in driver if e[3] == "fault"]
    ups = sorted(e[0] for e in driver if e[3] == "redis-up")
    with open(os.path.join(out, "faults.dat"), "w") as f, open(os.path.join(out, "pauses.dat"), "w") as down:
        f.write("# t_s row kind_index   (kinds: " + " ".join(kinds) + ")\n")
        down.write("# start_s end_s row kind_index   a holder or Redis SIGSTOPped until SIGCONT; Redis restarting until it answered\n")
        for t, _, _, kind, fields in faults:
            k = fields.get("kind", "")
            if k not in kinds:
                continue
            r = row.get(fields.get("worker", ""), 0)
            f.write(f"{seconds(t):.6f} {r} {kinds.index(k)}\n")
            if k == "stop-holder" or k == "stop-redis":
                until = int(fields.get("until", t))
                down.write(f"{seconds(t):.6f} {seconds(until):.6f} {r} {kinds.index(k)}\n")
            elif k == "restart-redis":
                up = next((u for u in ups if u > t), t)
                down.write(f"{seconds(t):.6f} {seconds(up):.6f} 0 {kinds.index(k)}\n")
    with open(os.path.join(out, "rows.dat"), "w") as f:
        f.write(f"{len(workers)} {max(seconds(h[1]) for h in holds):.3f}\n")


if __name__ == "__main__":
    plots = {"cdf": cdf, "sweep": sweep, "history": history}
    if len(sys.argv) != 4 or sys.argv[1] not in plots:
        fail("usage: prepare.py cdf|sweep|history INPUT OUTDIR")
    plots[sys.argv[1]](sys.argv[2], sys.argv[3])
