#!/usr/bin/env bash
# Starts a throwaway 3-master Redis Cluster (no replicas) on free loopback
# ports, with no persistence, and stops it when the calling script exits.
# Source it; afterwards DLOCK_CLUSTER_CONFIG names a dlock config file
# (redis.mode: cluster, every node a seed).

source scripts/loopback_server.sh
cluster_dir=$(mktemp -d /tmp/dlock-demo-cluster-XXXXXX)
cluster_pids=()
stop_throwaway_cluster() {
  for pid in "${cluster_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${cluster_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$cluster_dir"
}
trap stop_throwaway_cluster EXIT

cluster_ports=()
for node in 1 2 3; do
  if ! start_loopback_server "$cluster_dir" --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000; then
    echo "could not start a cluster node on a free loopback port" >&2
    return 1
  fi
  cluster_pids+=("$loopback_pid")
  cluster_ports+=("$loopback_port")
done

nodes=""
for port in "${cluster_ports[@]}"; do nodes="$nodes 127.0.0.1:$port"; done
# shellcheck disable=SC2086
redis-cli --cluster create $nodes --cluster-replicas 0 --cluster-yes >"$cluster_dir/create.log" 2>&1 || {
  cat "$cluster_dir/create.log" >&2
  return 1
}
for _ in $(seq 1 200); do
  healthy=yes
  for port in "${cluster_ports[@]}"; do
    redis-cli -h 127.0.0.1 -p "$port" cluster info | grep -q "cluster_state:ok" || healthy=""
  done
  [ -n "$healthy" ] && break
  sleep 0.05
done

DLOCK_CLUSTER_CONFIG="$cluster_dir/dlock-cluster.yaml"
seeds=$(printf '"127.0.0.1:%s", ' "${cluster_ports[@]}")
cat >"$DLOCK_CLUSTER_CONFIG" <<YAML
redis:
  mode: cluster
  cluster:
    nodes: [${seeds%, }]
lock:
  key_prefix: "dlock:"
logging:
  level: warn
YAML
export DLOCK_CLUSTER_CONFIG
echo "throwaway Redis Cluster on 127.0.0.1 ports ${cluster_ports[*]}"
