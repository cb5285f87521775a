#!/usr/bin/env bash
# Installs the Debian packages dlock needs and builds it into build/.
# Sourced by demo.sh and test.sh; run it alone to just set up and build.
# With setup_targets set (demo.sh sets it), only those targets are built: the
# demo needs the library, the examples and the dlock command, not the 100+
# test programs (a third of the time on a fresh 2-core machine).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(g++ cmake make pkg-config libhiredis-dev libspdlog-dev libyaml-cpp-dev catch2 redis-server redis-tools
          redis-sentinel          # Sentinel mode's tests and demo
          valgrind python3-redis  # these two for bench/callgrind.sh and bench/peers/run.sh
          libssl-dev openssl      # TLS; the openssl command makes the tests' and demo's certificates
          lua-check               # luacheck, the Lua scripts' linter (./scripts/test.sh)
          gnuplot-nox             # bench/plot.sh's SVG plots of the benchmark and the history check (and its test)
          libasio-dev             # standalone Asio (header-only): the async API's tests and examples
          python3)                # tests/docs/extract_snippets.py: the docs' code blocks into the suite
as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
"${as_root[@]}" apt-get update
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y "${packages[@]}"

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_WERROR=ON
if [ -n "${setup_targets:-}" ]; then
  # shellcheck disable=SC2086  # a list of target names, split on purpose
  cmake --build build -j"$(nproc)" --target $setup_targets
else
  cmake --build build -j"$(nproc)"
fi
