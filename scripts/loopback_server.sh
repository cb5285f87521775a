#!/usr/bin/env bash
# Source it: start_loopback_server DIR [REDIS-SERVER ARGS...] starts a
# redis-server without persistence on a free 127.0.0.1 port, its files in
# DIR/PORT, trying up to 20 random ports; sets loopback_pid and loopback_port,
# or returns 1 if none would start.
start_loopback_server() {
  local dir="$1"
  shift
  local port pid
  for _ in $(seq 1 20); do
    port=$((20000 + RANDOM % 20000))
    mkdir -p "$dir/$port"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir/$port" "$@" \
      --logfile "$dir/$port/redis.log" --daemonize no &
    pid=$!
    for _ in $(seq 1 100); do
      if redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then break; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    if kill -0 "$pid" 2>/dev/null && redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then
      loopback_pid=$pid
      loopback_port=$port
      return 0
    fi
    wait "$pid" 2>/dev/null || true
  done
  return 1
}
