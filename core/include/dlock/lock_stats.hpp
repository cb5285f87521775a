#pragma once
// Counters of a RedisLockService since it started, for dashboards and logs.

#include <chrono>
#include <cstdint>
#include <string>

namespace dlock {

struct LockStats {
  std::uint64_t acquired = 0;        // first holds granted (the lock was free)
  std::uint64_t reentered = 0;       // holds granted to a thread that already held the key
  std::uint64_t released = 0;        // holds released (inner and final)
  std::uint64_t contended = 0;       // lock()/try_lock() calls that found the key busy and waited
  std::uint64_t busy = 0;            // calls without a wait (try once) that found the key busy
  std::uint64_t timeouts = 0;        // calls with a wait that gave up at its end
  std::uint64_t lost = 0;            // locks found lost (watchdog, release, fixed lease run out)
  std::uint64_t renewals_sent = 0;   // watchdog renewals sent
  std::uint64_t renewals_failed = 0; // renewals that got no answer (Redis unreachable, timed out)
  std::uint64_t renewal_rounds = 0;  // watchdog round trips; renewals_sent / renewal_rounds = pipelining
  std::uint64_t handed_over = 0;     // of `acquired`: granted inside another local thread's release, no round trip
  // Latency of granted lock()/try_lock() calls, waiting included; upper
  // bounds of a log-scale histogram (within 1/8 of the true value).
  std::chrono::microseconds acquire_p50{0};
  std::chrono::microseconds acquire_p99{0};
  std::chrono::microseconds acquire_max{0};
  std::uint64_t acquire_count = 0;            // granted calls measured
  std::chrono::microseconds acquire_total{0};  // the sum of their latencies
};

// One line, e.g. "acquired=12 reentered=3 released=15 ... acquire_p50=180us".
// For a Prometheus scrape, see prometheus_text.hpp.
std::string format_stats(const LockStats& stats);

}  // namespace dlock
