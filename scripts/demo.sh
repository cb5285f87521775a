#!/usr/bin/env bash
# The README's demo command: set up, build, start a throwaway redis-server on
# loopback, run both examples against it, stop the server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh
source scripts/throwaway_redis.sh

echo
echo "== flash_sale: 2 processes x 8 threads, with the lock =="
build/examples/flash_sale --config config/dlock.yaml --sku SKU-1 --stock 100 --buyers 300 --threads 8 --processes 2 --reset
echo
echo "== flash_sale: the same sale without the lock (oversells) =="
build/examples/flash_sale --config config/dlock.yaml --sku SKU-2 --stock 100 --buyers 300 --threads 8 --processes 2 --reset --no-lock
echo
echo "== nested_reentrant =="
build/examples/nested_reentrant --config config/dlock.yaml
echo
echo "== scheduled_job: 3 instances, exactly one runs each round =="
build/examples/scheduled_job --config config/dlock.yaml --job nightly-report --rounds 4 --period-ms 400 --processes 3
