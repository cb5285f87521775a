#!/usr/bin/env bash
# Installs the Debian packages dlock needs and builds it into build/.
# Sourced by demo.sh and test.sh; run it alone to just set up and build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(g++ cmake make pkg-config libhiredis-dev libspdlog-dev libyaml-cpp-dev catch2 redis-server redis-tools
          redis-sentinel          # Sentinel mode's tests and demo
          valgrind python3-redis  # these two for bench/callgrind.sh and bench/peers/run.sh
          libssl-dev openssl      # TLS; the openssl command makes the tests' and demo's certificates
          lua-check               # luacheck, the Lua scripts' linter (./scripts/test.sh)
          libasio-dev)            # standalone Asio (header-only): the async API's tests and examples
as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
"${as_root[@]}" apt-get update
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y "${packages[@]}"

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_WERROR=ON
cmake --build build -j"$(nproc)"
