#!/usr/bin/env bash
# The README's demo command: set up, build, start a throwaway redis-server on
# loopback, run both examples against it, stop the server.
#   scripts/demo.sh        the examples over plaintext
#   scripts/demo.sh tls    flash_sale over TLS, against a TLS-only server with test certificates
#   scripts/demo.sh sentinel   Sentinel mode: a master, a replica, 3 Sentinels, a failover (scripts/demo_sentinel.sh)
#   scripts/demo.sh cluster    the examples against a throwaway 3-master Redis Cluster
#   scripts/demo.sh redlock    Redlock mode over 5 throwaway servers, two of them paused mid-sale
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode="${1:-}"
case "$mode" in
  ""|tls|sentinel|cluster|redlock) ;;
  *) echo "usage: $0 [tls|sentinel|cluster|redlock]" >&2; exit 64 ;;
esac
# Only what the demo runs; ./scripts/test.sh builds the rest.
setup_targets="flash_sale async_flash_sale nested_reentrant scheduled_job dlock_cli"
source scripts/setup.sh
if [ "$mode" = sentinel ]; then exec scripts/demo_sentinel.sh; fi
if [ "$mode" = tls ]; then
  DLOCK_THROWAWAY_TLS=1 source scripts/throwaway_redis.sh
  tls_config="$redis_dir/dlock-tls.yaml"
  cat >"$tls_config" <<YAML
redis:
  url: rediss://127.0.0.1:$DLOCK_REDIS_PORT
  tls:
    ca_file: $DLOCK_THROWAWAY_CERTS/ca.pem
YAML
  echo
  echo "== flash_sale over TLS: 2 processes x 8 threads, with the lock ($tls_config) =="
  build/examples/flash_sale --config "$tls_config" --sku SKU-TLS --stock 100 --buyers 300 --threads 8 --processes 2 --reset
  exit 0
fi
if [ "$mode" = cluster ]; then
  # ./scripts/demo.sh cluster: the same examples against a throwaway 3-master Redis Cluster.
  source scripts/throwaway_cluster.sh
  echo
  echo "== flash_sale on the cluster: 3 processes x 8 threads, with the lock =="
  build/examples/flash_sale --config "$DLOCK_CLUSTER_CONFIG" --sku SKU-1 --stock 100 --buyers 300 --threads 8 --processes 3 --reset
  echo
  echo "== nested_reentrant on the cluster =="
  build/examples/nested_reentrant --config "$DLOCK_CLUSTER_CONFIG"
  exit 0
fi
if [ "$mode" = redlock ]; then
  # ./scripts/demo.sh redlock: 5 independent servers; two are paused (SIGSTOP) for 2 s
  # in the middle of the sale, and the sale stays exact on the other three.
  source scripts/throwaway_redlock.sh
  echo
  echo "== flash_sale over a 5-node Redlock: 3 processes x 8 threads; nodes 1 and 2 paused for 2 s midway =="
  build/examples/flash_sale --config "$DLOCK_REDLOCK_CONFIG" --sku SKU-1 --stock 100 --buyers 300 --threads 8 \
    --processes 3 --reset &
  sale=$!
  sleep 0.5
  kill -STOP "${redlock_pids[0]}" "${redlock_pids[1]}"
  echo "(paused nodes 127.0.0.1:${redlock_ports[0]} and 127.0.0.1:${redlock_ports[1]})"
  sleep 2
  kill -CONT "${redlock_pids[0]}" "${redlock_pids[1]}"
  echo "(resumed them)"
  wait "$sale"
  echo
  echo "== nested_reentrant over the Redlock =="
  build/examples/nested_reentrant --config "$DLOCK_REDLOCK_CONFIG"
  exit 0
fi
source scripts/throwaway_redis.sh

echo
echo "== flash_sale: 2 processes x 8 threads, with the lock =="
build/examples/flash_sale --config config/dlock.yaml --sku SKU-1 --stock 100 --buyers 300 --threads 8 --processes 2 --reset
echo
echo "== flash_sale: the same sale without the lock (oversells) =="
build/examples/flash_sale --config config/dlock.yaml --sku SKU-2 --stock 100 --buyers 300 --threads 8 --processes 2 --reset --no-lock
echo
echo "== async_flash_sale: 2 processes x 100 coroutines on one thread each, with the lock =="
build/examples/async_flash_sale --config config/dlock.yaml --sku SKU-A --stock 100 --buyers 300 --coroutines 100 --processes 2 --reset
echo
echo "== async_flash_sale: the same without the lock (oversells) =="
build/examples/async_flash_sale --config config/dlock.yaml --sku SKU-B --stock 100 --buyers 300 --coroutines 100 --processes 2 --reset --no-lock
echo
echo "== nested_reentrant =="
build/examples/nested_reentrant --config config/dlock.yaml
echo
echo "== scheduled_job: 3 instances, exactly one runs each round =="
build/examples/scheduled_job --config config/dlock.yaml --job nightly-report --rounds 4 --period-ms 400 --processes 3
