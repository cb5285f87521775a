#pragma once
// Counters of a RedisLockService since it started, and gauges of what it
// holds and waits for now, for dashboards and logs.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock {

// The gauges of the keys under one prefix (lock.metrics in the config).
struct KeyPrefixGauges {
  std::string key_prefix;  // as configured or found by the separator, or "other"
  std::uint64_t held = 0;
  std::uint64_t waiting = 0;
};

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
  std::uint64_t releases_failed = 0; // final releases that got no reply or an error reply (each logged)
  // Latency of granted lock()/try_lock() calls, waiting included; upper
  // bounds of a log-scale histogram (within 1/8 of the true value).
  std::chrono::microseconds acquire_p50{0};
  std::chrono::microseconds acquire_p99{0};
  std::chrono::microseconds acquire_max{0};
  std::uint64_t acquire_count = 0;            // granted calls measured
  std::chrono::microseconds acquire_total{0};  // the sum of their latencies

  // Gauges: what is true at the snapshot, not since start.
  // Keys held now: one per key and owner however deep the re-entry; a
  // multi-lock counts each of its keys, a semaphore or read-write hold one.
  std::uint64_t held = 0;
  // Acquire calls (blocking or async, any primitive) that found their key busy and wait now.
  std::uint64_t waiting = 0;
  // With lock.metrics set: `held` and `waiting` by key prefix (they add up
  // to them). Every series seen since start stays, at 0 when idle, so a
  // dashboard's lines do not come and go; "other" last. Empty otherwise.
  std::vector<KeyPrefixGauges> by_key_prefix;
};

// One line, e.g. "acquired=12 reentered=3 released=15 ... acquire_p50=180us".
// For a Prometheus scrape, see prometheus_text.hpp.
std::string format_stats(const LockStats& stats);

}  // namespace dlock
