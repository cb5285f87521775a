#!/usr/bin/env bash
# Builds the libFuzzer target over dlock::load_config with clang
# (-fsanitize=fuzzer,address,undefined) and runs it for a bounded time on the
# seed corpus (fuzz/corpus/, seeded from config/*.yaml).
#   fuzz/run.sh [SECONDS]      default 60
# Installs clang and libclang-rt-14-dev (Debian) if clang++ is missing.
# Exit status: 0 when nothing was found; libFuzzer's non-zero status and the
# crashing input (fuzz/findings/) otherwise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds="${1:-60}"

if ! command -v clang++ >/dev/null || ! compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  "${as_root[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y clang libclang-rt-14-dev libyaml-cpp-dev libspdlog-dev
fi

out=build-fuzz
mkdir -p "$out" fuzz/findings
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -Icore/include -Iintegration/include -Iintegration/src)
# spdlog is used header-only here (only its level names are needed).
# Every source load_config is built from.
sources=(integration/src/config/*.cpp)
if [ ! -x "$out/config_fuzzer" ] || [ -n "$(find fuzz/config_fuzzer.cpp "${sources[@]}" integration/src/*/*.hpp \
     integration/include core/include -newer "$out/config_fuzzer" -print -quit)" ]; then
  clang++ "${flags[@]}" -DSPDLOG_HEADER_ONLY -DSPDLOG_FMT_EXTERNAL \
    fuzz/config_fuzzer.cpp "${sources[@]}" -o "$out/config_fuzzer" -lyaml-cpp -lfmt
fi

# A working copy of the seeds: libFuzzer adds what it finds to its first corpus directory.
rm -rf "$out/corpus" && mkdir -p "$out/corpus" && cp fuzz/corpus/* "$out/corpus/"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
"$out/config_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
  -artifact_prefix=fuzz/findings/ -print_final_stats=1 "$out/corpus" 2>&1 | tail -n 40
exit "${PIPESTATUS[0]}"
