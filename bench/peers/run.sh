#!/usr/bin/env bash
# The peers side by side in one run: uncontended lock+unlock cycles per
# second (one thread, one key each) of dlock, dlock's scripts sent raw, the
# minimal reentrant pair, the bare SET NX PX client, node-redlock and
# redis-py's Lock, all against ONE throwaway redis-server on 127.0.0.1.
#
#   bench/peers/run.sh [--seconds S] [--rounds N]     (defaults: 0.5 s, 10 rounds)
#
# This machine's loopback round trip changes mode within seconds, so the
# clients take turns: each round runs every client for S seconds, the
# starting client moving on by one per round; the table gives each client's
# median round and the median of its rounds' ratios to the bare client's
# rate in the same round. Each run is a fresh process whose start, connection and
# warm-up (100 cycles; node 0.5 s, for V8 to optimise) are not timed.
# Builds nothing: expects build/bench/dlock-bench (or $DLOCK_BENCH).
# Installs what the peers need: python3-redis with apt-get, redlock and
# ioredis with `npm ci` (the versions of bench/peers/node/package-lock.json)
# into bench/peers/node/node_modules.
set -euo pipefail

# Ten short rounds rather than five long ones: the median then rides out a
# mode change of the round trip better, for the same time spent measuring.
seconds=0.5
rounds=10
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "usage: bench/peers/run.sh [--seconds S] [--rounds N]" >&2; exit 64 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bench=${DLOCK_BENCH:-$root/build/bench/dlock-bench}
python=/usr/bin/python3  # Debian's, where python3-redis installs; not a python3 earlier on PATH

if [ ! -x "$bench" ]; then
  echo "run.sh: $bench is missing; build it first:" >&2
  echo "  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build build --target dlock-bench" >&2
  exit 1
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "run.sh: node and npm are needed for node-redlock (Debian: apt-get install nodejs npm)" >&2
  exit 1
fi
if ! command -v redis-server >/dev/null; then
  echo "run.sh: redis-server is needed (Debian: apt-get install redis-server)" >&2
  exit 1
fi
if ! "$python" -c 'import redis' 2>/dev/null; then
  echo "installing python3-redis for redis-py's Lock"
  apt-get install -y python3-redis >/dev/null
fi
if [ ! -d "$here/node/node_modules" ]; then
  echo "installing redlock and ioredis into bench/peers/node (npm ci)"
  (cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error)
fi

# shellcheck source=../../scripts/throwaway_redis.sh
source "$root/scripts/throwaway_redis.sh"
address=127.0.0.1:$DLOCK_REDIS_PORT
# shellcheck disable=SC2154  # redis_dir is throwaway_redis.sh's, removed on exit
errors=$redis_dir/client.err

# name | command printing cycles/s | reentrant | fair | fenced
clients=(
  "dlock|$bench --cycles dlock --seconds $seconds --redis $address|yes|yes|yes"
  "dlock RAII (release unawaited)|$bench --cycles dlock-raii --seconds $seconds --redis $address|yes|yes|yes"
  "dlock scripts raw (ideal)|$bench --cycles ideal --seconds $seconds --redis $address|yes|yes|yes"
  "minimal reentrant pair|$bench --cycles minimal-pair --seconds $seconds --redis $address|yes|no|yes"
  "bare SET NX PX + CAD|$bench --cycles bare --seconds $seconds --redis $address|no|no|no"
  "node-redlock|node $here/node/redlock_cycles.js 127.0.0.1 $DLOCK_REDIS_PORT $seconds|no|no|no"
  "redis-py Lock|$python $here/python/redis_py_cycles.py 127.0.0.1 $DLOCK_REDIS_PORT $seconds|no|no|no"
)
count=${#clients[@]}
bare=3  # the yardstick: its index in clients
declare -a results  # per client: the rates of its rounds, space-separated
failed=0

echo "redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), node $(node --version)," \
  "redlock $(node -p "require('$here/node/node_modules/redlock/package.json').version")," \
  "ioredis $(node -p "require('$here/node/node_modules/ioredis/package.json').version")," \
  "redis-py $("$python" -c 'import redis; print(redis.__version__)')"
echo "$rounds rounds x $seconds s per client, one thread, one key each, lease 30 s"
for ((round = 0; round < rounds; ++round)); do
  for ((step = 0; step < count; ++step)); do
    i=$(((round + step) % count))
    IFS='|' read -r name command _ <<<"${clients[$i]}"
    if rate=$($command 2>"$errors" | tail -n 1) && [[ $rate =~ ^[0-9]+$ ]]; then
      results[i]="${results[$i]:-} $rate"
    else
      echo "round $((round + 1)): $name failed:" >&2
      cat "$errors" >&2
      results[i]="${results[$i]:-} -"  # keeps the rounds of every client aligned
      failed=1
    fi
  done
  echo "round $((round + 1)) of $rounds done"
done

# The median of the numbers among its arguments ("-" is a failed round).
median() { printf '%s\n' "$@" | grep -E '^[0-9.]+$' | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Round by round, a client's rate over the bare client's in the same round:
# rounds taken in another mode of the round trip then cannot skew the ratio.
round_ratios() { awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, " "); split(b, y, " "); for (r = 1; r <= n; ++r) if (x[r] != "-" && y[r] != "-" && y[r] > 0) printf "%.4f\n", x[r] / y[r] }'; }

echo
echo "cycles/s: median of the rounds; x bare: median of the rounds' ratios to the bare client's rate"
printf '%-31s %10s %8s  %-9s %-4s %-6s  %s\n' client cycles/s "x bare" reentrant fair fenced "rounds (cycles/s)"
for ((i = 0; i < count; ++i)); do
  IFS='|' read -r name _ reentrant fair fenced <<<"${clients[$i]}"
  # shellcheck disable=SC2086  # the rounds are words on purpose
  rate=$(median ${results[$i]:-})
  # shellcheck disable=SC2046
  ratio=$(median $(round_ratios "${results[$i]:-}" "${results[$bare]:-}"))
  [ "$ratio" = - ] || ratio=$(printf '%.3f' "$ratio")
  printf '%-31s %10s %8s  %-9s %-4s %-6s %s\n' "$name" "${rate%.*}" "$ratio" "$reentrant" "$fair" "$fenced" \
    "${results[$i]:-}"
done
if apt-cache policy libredis++-dev 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  echo "redis-plus-plus RedLock: not measured (libredis++-dev is packaged here, but no client for it is written yet)"
else
  echo "redis-plus-plus RedLock: not measured (libredis++-dev is not packaged in this Debian release)"
fi
exit "$failed"
