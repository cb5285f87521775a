#!/usr/bin/env bash
# The README's test command: set up, build, run the whole test suite. Each
# test starts (and stops) its own redis-server on a free loopback port.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh
cd build
ctest -j"$(nproc)" --output-on-failure --timeout 300
