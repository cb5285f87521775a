#!/usr/bin/env bash
# Draws the benchmark's and the history check's numbers as SVG plots (gnuplot):
#
#   bench/plot.sh [--peers FILE.csv] [--bench FILE.jsonl] [--history RECORD_DIR] [--out DIR]
#
#   --peers    bench/peers/contention.sh --out FILE.csv      -> DIR/contention-cdf.svg
#              time to acquire one key under contention, a CDF per client
#   --bench    dlock-bench --only contention --json FILE     -> DIR/throughput-threads.svg
#              acquisitions per second against threads (the contention sweep)
#   --history  a record of scripts/history.sh (build/history-records/seed-N)  -> DIR/history-timeline.svg
#              who held the lock when, the overlaps and every fault
#
# DIR defaults to docs/img, where the plots docs/performance.md and
# docs/history-check.md show live. Give at least one input; each makes its plot.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=$here/../docs/img
peers="" bench="" history=""
usage() { echo "usage: bench/plot.sh [--peers FILE.csv] [--bench FILE.jsonl] [--history RECORD_DIR] [--out DIR]" >&2; exit 64; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case "$1" in
    --peers) peers="$2" ;;
    --bench) bench="$2" ;;
    --history) history="$2" ;;
    --out) out="$2" ;;
    *) usage ;;
  esac
  shift 2
done
[ -n "$peers$bench$history" ] || usage
for input in "$peers" "$bench" "$history"; do
  if [ -n "$input" ] && [ ! -e "$input" ]; then
    echo "bench/plot.sh: $input does not exist; see the usage in bench/plot.sh for what makes each input" >&2
    exit 1
  fi
done
if ! command -v gnuplot >/dev/null; then
  echo "bench/plot.sh: gnuplot is needed (Debian: apt-get install gnuplot-nox; scripts/setup.sh installs it)" >&2
  exit 1
fi

mkdir -p "$out"
data=$(mktemp -d /tmp/dlock-plot-XXXXXX)
trap 'rm -rf "$data"' EXIT
prepare() { /usr/bin/python3 "$here/plots/prepare.py" "$@"; }
draw() { gnuplot -e "dir='$data'; out='$out/$2'" "$here/plots/$1"; echo "bench/plot.sh: wrote $out/$2"; }

if [ -n "$peers" ]; then
  prepare cdf "$peers" "$data"
  draw contention_cdf.gp contention-cdf.svg
fi
if [ -n "$bench" ]; then
  prepare sweep "$bench" "$data"
  draw throughput_threads.gp throughput-threads.svg
fi
if [ -n "$history" ]; then
  prepare history "$history" "$data"
  draw history_timeline.gp history-timeline.svg
fi
