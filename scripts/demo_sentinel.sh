#!/usr/bin/env bash
# `./scripts/demo.sh sentinel`: a throwaway master, one replica and three
# Sentinels on loopback; flash_sale runs through the Sentinels, the master is
# SIGKILLed, and a second run and `dlock run` go to the promoted replica
# without any change to their config. Everything is stopped at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

dir=$(mktemp -d /tmp/dlock-demo-sentinel-XXXXXX)
pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap stop_all EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
await_ping() {
  for _ in $(seq 1 100); do
    redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "nothing answers on port $1" >&2
  return 1
}
# start NAME ARGS...: a server of its own directory, in the foreground of a background job.
start() {
  local name=$1
  shift
  mkdir -p "$dir/$name"
  redis-server "$@" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir/$name" \
    --logfile "$dir/$name/log" --daemonize no &
  pids+=($!)
}

master_port=$(free_port)
replica_port=$(free_port)
start master --port "$master_port" --repl-diskless-sync-delay 0
master_pid=${pids[-1]}
await_ping "$master_port"
start replica --port "$replica_port" --replicaof 127.0.0.1 "$master_port"
await_ping "$replica_port"
# Connected is not synced: wait until the replica has loaded the master's data.
until redis-cli -p "$replica_port" info replication | grep -q master_link_status:up; do sleep 0.1; done

sentinel_ports=()
for i in 1 2 3; do
  port=$(free_port)
  mkdir -p "$dir/sentinel$i"
  printf 'sentinel monitor mymaster 127.0.0.1 %s 2\nsentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 3000\n' \
    "$master_port" >"$dir/sentinel$i/sentinel.conf"
  start "sentinel$i" "$dir/sentinel$i/sentinel.conf" --sentinel --port "$port"
  await_ping "$port"
  sentinel_ports+=("$port")
done
# Failover needs the Sentinels to know each other (hello messages every 2 s).
until [ "$(redis-cli -p "${sentinel_ports[0]}" sentinel sentinels mymaster | grep -c '^name$')" -ge 2 ]; do sleep 0.2; done

cat >"$dir/dlock.yaml" <<YAML
redis:
  mode: sentinel
  sentinel:
    master_name: mymaster
    nodes: ["127.0.0.1:${sentinel_ports[0]}", "127.0.0.1:${sentinel_ports[1]}", "127.0.0.1:${sentinel_ports[2]}"]
lock:
  watchdog_timeout_ms: 6000
  wait_ms: 20000
logging:
  level: info
YAML
echo "master 127.0.0.1:$master_port, replica 127.0.0.1:$replica_port, Sentinels ${sentinel_ports[*]}"
echo "config:"
sed 's/^/  /' "$dir/dlock.yaml"

echo
echo "== flash_sale through the Sentinels: 2 processes x 8 threads =="
build/examples/flash_sale --config "$dir/dlock.yaml" --sku SKU-S --stock 100 --buyers 150 --threads 8 --processes 2 --reset

# Replication is asynchronous: let the replica catch up before looking at it.
redis-cli -p "$master_port" wait 1 1000 >/dev/null
echo "stock on the master: $(redis-cli -p "$master_port" get stock:SKU-S), on the replica: $(redis-cli -p "$replica_port" get stock:SKU-S)"
echo
echo "== SIGKILL the master (127.0.0.1:$master_port) =="
kill -KILL "$master_pid"
started=$(date +%s%N)
until [ "$(redis-cli -p "${sentinel_ports[0]}" sentinel get-master-addr-by-name mymaster | tail -1)" = "$replica_port" ]; do
  sleep 0.1
done
echo "the Sentinels promoted 127.0.0.1:$replica_port after $((($(date +%s%N) - started) / 1000000)) ms"

echo "stock on the promoted replica: $(redis-cli -p "$replica_port" get stock:SKU-S)"
echo
echo "== a new sale (same config), now on the promoted replica =="
build/examples/flash_sale --config "$dir/dlock.yaml" --sku SKU-T --stock 50 --buyers 60 --threads 8 --processes 2 --reset

echo
echo "== dlock run through the Sentinels =="
build/integration/cli/dlock run nightly-report --config "$dir/dlock.yaml" -- sh -c 'echo "holding nightly-report on the new master"'
echo "on the new master: stock:SKU-S=$(redis-cli -p "$replica_port" get stock:SKU-S) (sold out before the kill), stock:SKU-T=$(redis-cli -p "$replica_port" get stock:SKU-T)"
