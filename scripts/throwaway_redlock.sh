#!/usr/bin/env bash
# Starts 5 throwaway independent redis-servers on free loopback ports, with
# no persistence, and stops them when the calling script exits. Source it;
# afterwards DLOCK_REDLOCK_CONFIG names a dlock config file (redis.mode:
# redlock over the 5), and redlock_pids/redlock_ports list the servers.
#
# The file sets restarted_node_delay_ms: 0 only because these servers are
# brand new and never restart during the demo: with the default (30000), a
# node that just started sits out 30 s before its grants count.

source scripts/loopback_server.sh
redlock_dir=$(mktemp -d /tmp/dlock-demo-redlock-XXXXXX)
redlock_pids=()
redlock_ports=()
stop_throwaway_redlock() {
  for pid in "${redlock_pids[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true; done
  for pid in "${redlock_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$redlock_dir"
}
trap stop_throwaway_redlock EXIT

for node in 1 2 3 4 5; do
  if ! start_loopback_server "$redlock_dir"; then
    echo "could not start a Redlock node on a free loopback port" >&2
    return 1
  fi
  redlock_pids+=("$loopback_pid")
  redlock_ports+=("$loopback_port")
done

DLOCK_REDLOCK_CONFIG="$redlock_dir/dlock-redlock.yaml"
{
  echo "redis:"
  echo "  mode: redlock"
  echo "  command_timeout_ms: 300      # per node: a paused node costs a call this much"
  echo "  redlock:"
  printf '    nodes: ['
  sep=""
  for port in "${redlock_ports[@]}"; do printf '%s"127.0.0.1:%s"' "$sep" "$port"; sep=", "; done
  echo "]"
  echo "    restarted_node_delay_ms: 0  # brand-new throwaway servers (see scripts/throwaway_redlock.sh)"
} >"$DLOCK_REDLOCK_CONFIG"
export DLOCK_REDLOCK_CONFIG
