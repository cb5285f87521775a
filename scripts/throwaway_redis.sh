#!/usr/bin/env bash
# Starts a redis-server on a free loopback port, with no persistence, for
# the demo and the peers benchmark, and stops it when the calling script exits.
# Source it; afterwards DLOCK_REDIS_PORT names the port. With
# DLOCK_THROWAWAY_TLS=1 it makes test certificates (scripts/make_test_certs.sh)
# in its directory and listens with TLS only; DLOCK_THROWAWAY_CERTS names them.

redis_dir=$(mktemp -d /tmp/dlock-demo-redis-XXXXXX)
redis_pid=""
stop_throwaway_redis() {
  if [ -n "$redis_pid" ]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  rm -rf "$redis_dir"
}
trap stop_throwaway_redis EXIT

listen=() ping_tls=()
if [ "${DLOCK_THROWAWAY_TLS:-0}" = 1 ]; then
  DLOCK_THROWAWAY_CERTS="$redis_dir/certs"
  "$(dirname "${BASH_SOURCE[0]}")/make_test_certs.sh" "$DLOCK_THROWAWAY_CERTS"
  listen=(--tls-cert-file "$DLOCK_THROWAWAY_CERTS/server.pem" --tls-key-file "$DLOCK_THROWAWAY_CERTS/server.key"
          --tls-ca-cert-file "$DLOCK_THROWAWAY_CERTS/ca.pem" --tls-auth-clients no)
  ping_tls=(--tls --cacert "$DLOCK_THROWAWAY_CERTS/ca.pem")
fi

for attempt in $(seq 1 20); do
  port=$((20000 + RANDOM % 20000))
  if [ ${#listen[@]} -gt 0 ]; then ports=(--port 0 --tls-port "$port" "${listen[@]}"); else ports=(--port "$port"); fi
  redis-server "${ports[@]}" --bind 127.0.0.1 --save "" --appendonly no --dir "$redis_dir" \
    --logfile "$redis_dir/redis.log" --daemonize no &
  redis_pid=$!
  for _ in $(seq 1 100); do
    if redis-cli "${ping_tls[@]}" -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then break; fi
    kill -0 "$redis_pid" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$redis_pid" 2>/dev/null && redis-cli "${ping_tls[@]}" -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then
    export DLOCK_REDIS_HOST=127.0.0.1 DLOCK_REDIS_PORT="$port"
    echo "throwaway redis-server on 127.0.0.1:$port"
    return 0
  fi
  wait "$redis_pid" 2>/dev/null || true
  redis_pid=""
done
echo "could not start redis-server on a free loopback port" >&2
return 1
