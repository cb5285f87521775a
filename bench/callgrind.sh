#!/usr/bin/env bash
# Instructions per lock cycle, counted by callgrind: a figure that does not
# move with this machine's round-trip modes or with other load.
#
#   bench/callgrind.sh             both tables below
#   bench/callgrind.sh client      the client's instructions per uncontended cycle
#   bench/callgrind.sh server      redis-server's per uncontended cycle, and per acquisition
#                                  with 8 threads of one service on one key
#
# Each figure is (I(N2) - I(N1)) / (N2 - N1): two runs of different lengths,
# so start-up, connecting and shutting down cancel out. Needs valgrind and a
# built build/bench/dlock-bench; starts its own redis-servers on loopback.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bench=build/bench/dlock-bench
[ -x "$bench" ] || { echo "$0: build $bench first (./scripts/setup.sh)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "$0: needs valgrind (apt-get install -y valgrind)" >&2; exit 1; }
what="${1:-all}"
short=200 long=2200
work=$(mktemp -d /tmp/dlock-callgrind-XXXXXX)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { echo $((20000 + RANDOM % 20000)); }
total_of() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }

# Starts redis-server on a free port, optionally under callgrind (its count in $work/server.out).
start_server() {
  local wrap=()
  [ "${1:-}" = counted ] && wrap=(valgrind --tool=callgrind --callgrind-out-file="$work/server.out")
  for _ in $(seq 1 20); do
    port=$(free_port)
    "${wrap[@]}" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
      >"$work/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 200); do
      redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.05
    done
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  done
  echo "$0: no redis-server started" >&2
  exit 1
}
stop_server() {
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

client_instructions() {  # CLIENT COUNT
  valgrind --tool=callgrind --callgrind-out-file="$work/client.out" \
    "$bench" --cycles "$1" --count "$2" --redis "127.0.0.1:$port" >/dev/null 2>&1
  total_of "$work/client.out"
}

server_instructions() {  # CLIENT COUNT THREADS
  start_server counted
  "$bench" --cycles "$1" --count "$2" --threads "$3" --redis "127.0.0.1:$port" >/dev/null
  stop_server
  total_of "$work/server.out"
}

per_cycle() { echo $(( ($2 - $1) / (long - short) )); }

if [ "$what" = all ] || [ "$what" = client ]; then
  echo "client instructions per uncontended lock+unlock (callgrind, ($long - $short) cycles)"
  start_server
  for client in dlock ideal minimal-pair bare; do
    printf '  %-14s %8d\n' "$client" "$(per_cycle "$(client_instructions "$client" $short)" "$(client_instructions "$client" $long)")"
  done
  stop_server
fi
if [ "$what" = all ] || [ "$what" = server ]; then
  echo "redis-server instructions per uncontended lock+unlock (callgrind, ($long - $short) cycles)"
  for client in dlock minimal-pair bare; do
    printf '  %-14s %8d\n' "$client" "$(per_cycle "$(server_instructions "$client" $short 1)" "$(server_instructions "$client" $long 1)")"
  done
  echo "redis-server instructions per acquisition, 8 threads of one service on one key"
  # 8 threads x N cycles each: the difference is 8 x (long - short) / 8 acquisitions.
  printf '  %-14s %8d\n' "dlock" "$(( ( $(server_instructions dlock $((long / 8)) 8) - $(server_instructions dlock $((short / 8)) 8) ) / (long / 8 * 8 - short / 8 * 8) ))"
fi
