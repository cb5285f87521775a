#pragma once
// Lock-free counters behind RedisLockService::stats(). Every member is an
// atomic updated with relaxed ordering: the numbers are for people, not for
// synchronisation.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "dlock/lock_stats.hpp"

namespace dlock::detail {

class StatsRecorder {
 public:
  std::atomic<std::uint64_t> acquired{0}, reentered{0}, released{0}, contended{0}, busy{0}, timeouts{0}, lost{0},
      renewals_sent{0}, renewals_failed{0}, renewal_rounds{0}, handed_over{0}, releases_failed{0};

  void record_acquire_latency(std::chrono::nanoseconds latency);
  LockStats snapshot() const;

 private:
  // Log-linear buckets of microseconds: 8 sub-buckets per power of two, up to ~2^40 µs.
  static constexpr int kSubBuckets = 8;
  static constexpr int kBuckets = 41 * kSubBuckets;
  static int bucket_of(std::uint64_t micros);
  static std::uint64_t upper_bound_of(int bucket);

  std::array<std::atomic<std::uint64_t>, kBuckets> histogram_{};
  std::atomic<std::uint64_t> max_micros_{0};
  std::atomic<std::uint64_t> total_micros_{0};
};

}  // namespace dlock::detail
