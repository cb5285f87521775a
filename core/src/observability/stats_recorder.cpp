// The acquire-latency histogram behind stats() (8 buckets per power of two of microseconds),
// its percentiles read from bucket bounds, and the snapshot of every counter.
#include "dlock/detail/stats_recorder.hpp"

#include <bit>

namespace dlock::detail {

int StatsRecorder::bucket_of(std::uint64_t micros) {
  if (micros < kSubBuckets) return static_cast<int>(micros);
  const int exponent = std::bit_width(micros) - 1;  // micros in [2^e, 2^(e+1))
  const int sub = static_cast<int>((micros >> (exponent - 3)) & (kSubBuckets - 1));
  const int bucket = (exponent - 2) * kSubBuckets + sub;
  return bucket < kBuckets ? bucket : kBuckets - 1;
}

std::uint64_t StatsRecorder::upper_bound_of(int bucket) {
  if (bucket < kSubBuckets) return static_cast<std::uint64_t>(bucket);
  const int exponent = bucket / kSubBuckets + 2;
  const std::uint64_t sub = static_cast<std::uint64_t>(bucket % kSubBuckets);
  return ((kSubBuckets + sub + 1) << (exponent - 3)) - 1;
}

void StatsRecorder::record_acquire_latency(std::chrono::nanoseconds latency) {
  const auto micros = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(latency).count());
  histogram_[static_cast<std::size_t>(bucket_of(micros))].fetch_add(1, std::memory_order_relaxed);
  total_micros_.fetch_add(micros, std::memory_order_relaxed);
  std::uint64_t seen = max_micros_.load(std::memory_order_relaxed);
  while (seen < micros && !max_micros_.compare_exchange_weak(seen, micros, std::memory_order_relaxed)) {
  }
}

LockStats StatsRecorder::snapshot() const {
  LockStats stats;
  stats.acquired = acquired.load(std::memory_order_relaxed);
  stats.reentered = reentered.load(std::memory_order_relaxed);
  stats.released = released.load(std::memory_order_relaxed);
  stats.contended = contended.load(std::memory_order_relaxed);
  stats.busy = busy.load(std::memory_order_relaxed);
  stats.timeouts = timeouts.load(std::memory_order_relaxed);
  stats.lost = lost.load(std::memory_order_relaxed);
  stats.renewals_sent = renewals_sent.load(std::memory_order_relaxed);
  stats.renewals_failed = renewals_failed.load(std::memory_order_relaxed);
  stats.renewal_rounds = renewal_rounds.load(std::memory_order_relaxed);
  stats.handed_over = handed_over.load(std::memory_order_relaxed);
  stats.releases_failed = releases_failed.load(std::memory_order_relaxed);

  std::array<std::uint64_t, kBuckets> counts{};
  std::uint64_t total = 0;
  for (int i = 0; i < kBuckets; ++i) total += counts[i] = histogram_[i].load(std::memory_order_relaxed);
  const std::uint64_t max_micros = max_micros_.load(std::memory_order_relaxed);
  auto percentile = [&](std::uint64_t per_mille) {
    if (total == 0) return std::chrono::microseconds(0);
    const std::uint64_t rank = (total * per_mille + 999) / 1000;  // 1-based rank of the sample
    std::uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts[i];
      if (seen >= rank) return std::chrono::microseconds(std::min(upper_bound_of(i), max_micros));
    }
    return std::chrono::microseconds(max_micros);
  };
  stats.acquire_p50 = percentile(500);
  stats.acquire_p99 = percentile(990);
  stats.acquire_max = std::chrono::microseconds(max_micros);
  stats.acquire_count = total;
  stats.acquire_total = std::chrono::microseconds(total_micros_.load(std::memory_order_relaxed));
  return stats;
}

}  // namespace dlock::detail
