#pragma once
// Timed blocks of uncontended lock+unlock cycles, for the benchmarks that
// compare two deployments in alternating blocks (the loopback round trip
// changes mode within seconds, so only interleaved blocks compare).

#include <algorithm>
#include <chrono>
#include <vector>

#include "dlock/dlock.hpp"

namespace dlock::bench {

// µs per cycle over one block of `cycles` lock+unlock cycles of one key.
inline double block_us_per_cycle(RedisLockService& service, int cycles) {
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < cycles; ++i) {
    LockGuard guard = service.lock("bench:cycle");
    guard.unlock();
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count() / cycles;
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace dlock::bench
