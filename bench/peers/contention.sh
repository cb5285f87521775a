#!/usr/bin/env bash
# Time-to-acquire under contention, dlock beside node-redlock and redis-py's
# Lock: for each client in turn, P processes (one client each) take ONE key
# for S seconds against one throwaway redis-server on 127.0.0.1, each holder
# doing a non-atomic GET/SET increment of a counter; every acquisition's wait
# (lock called -> returned) is written to a CSV for bench/plot.sh's CDF.
#
#   bench/peers/contention.sh --out FILE.csv [--seconds S] [--processes P]   (defaults: 5 s, 4)
#
# The CSV has a header and one row per acquisition: client,wait_us. Each
# client's counter is checked against its acquisitions (exit 1 if one is
# off: the lock let two holders in). dlock's processes are dlock-bench's own
# contention workers (`--worker`, one thread each); builds nothing: expects
# build/bench/dlock-bench (or $DLOCK_BENCH), and the peers installed as
# bench/peers/run.sh installs them.
set -euo pipefail

seconds=5
processes=4
out=""
usage() { echo "usage: bench/peers/contention.sh --out FILE.csv [--seconds S] [--processes P]" >&2; exit 64; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case "$1" in
    --seconds) seconds="$2" ;;
    --processes) processes="$2" ;;
    --out) out="$2" ;;
    *) usage ;;
  esac
  shift 2
done
[ -n "$out" ] || usage
[[ "$processes" =~ ^[1-9][0-9]*$ ]] || usage

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bench=${DLOCK_BENCH:-$root/build/bench/dlock-bench}
python=/usr/bin/python3  # Debian's, where python3-redis installs
if [ ! -x "$bench" ]; then
  echo "contention.sh: $bench is missing; build it first: cmake --build build --target dlock-bench" >&2
  exit 1
fi
if ! "$python" -c 'import redis' 2>/dev/null || [ ! -d "$here/node/node_modules" ]; then
  echo "contention.sh: the peers are not installed; bench/peers/run.sh installs them (python3-redis, npm ci)" >&2
  exit 1
fi

# shellcheck source=../../scripts/throwaway_redis.sh
source "$root/scripts/throwaway_redis.sh"
port=$DLOCK_REDIS_PORT
# shellcheck disable=SC2154  # redis_dir is throwaway_redis.sh's, removed on exit
work=$redis_dir

# name | counter key | command, given START_NS UNTIL_NS and the process' index, printing waits in ns
clients=(
  "dlock|bench:contended:counter"
  "node-redlock|bench:peers:contended:node:counter"
  "redis-py Lock|bench:peers:contended:py:counter"
)
run_one() {  # client-name index start until -> its waits in ns on stdout
  case "$1" in
    dlock)
      "$bench" --worker 127.0.0.1 "$port" 1 "$2" "$3" "$4" "$work/dlock-$2" &&
        awk '{ print $3 }' "$work/dlock-$2" ;;  # acquired released wait worker
    node-redlock) node "$here/node/redlock_contend.js" 127.0.0.1 "$port" "$3" "$4" ;;
    "redis-py Lock") "$python" "$here/python/redis_py_contend.py" 127.0.0.1 "$port" "$3" "$4" ;;
  esac
}

echo "client,wait_us" >"$out"
failed=0
for entry in "${clients[@]}"; do
  IFS='|' read -r name counter <<<"$entry"
  # Every process starts at the same CLOCK_MONOTONIC instant, a second ahead so all have connected.
  now=$("$python" -c 'import time; print(time.monotonic_ns())')
  start=$((now + 1000000000))
  until=$(awk -v s="$start" -v d="$seconds" 'BEGIN { printf "%.0f", s + d * 1e9 }')
  pids=()
  for ((p = 0; p < processes; ++p)); do
    run_one "$name" "$p" "$start" "$until" >"$work/waits-$p" 2>"$work/err-$p" &
    pids+=($!)
  done
  for ((p = 0; p < processes; ++p)); do
    if ! wait "${pids[$p]}"; then
      echo "contention.sh: $name, process $p failed:" >&2
      cat "$work/err-$p" >&2
      failed=1
    fi
  done
  acquisitions=$(cat "$work"/waits-* | wc -l)
  value=$(redis-cli -h 127.0.0.1 -p "$port" get "$counter")
  cat "$work"/waits-* | awk -v name="$name" '{ printf "%s,%.3f\n", name, $1 / 1000 }' >>"$out"
  # Per process too: a lock that lets its releaser take it again at once shows a short wait for most
  # acquisitions while the other processes starve, which the CDF alone does not tell.
  shares=$(for ((p = 0; p < processes; ++p)); do wc -l <"$work/waits-$p"; done | paste -sd/)
  echo "$name: $acquisitions acquisitions by $processes processes ($shares) in $seconds s, counter $value"
  if [ "$value" != "$acquisitions" ]; then
    echo "contention.sh: $name's counter is $value after $acquisitions acquisitions: two holders at once" >&2
    failed=1
  fi
  rm -f "$work"/waits-* "$work"/err-*
done
exit "$failed"
