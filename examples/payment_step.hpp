#pragma once
// The flash sale's simulated payment step: a provider that accepts at most
// N calls at once across every process, enforced by a distributed semaphore
// (WITH_DISTRIBUTED_PERMIT). Each call counts itself in Redis while it runs
// and records the highest count seen, so the sale can show the limit held.
// With 0 slots there is no payment step.
//
// The count survives what the crash demo does to it: a call is an entry
// that expires (scripts/payment_call_begin.lua), so a process killed
// mid-call stops counting before its permit comes back to someone else,
// instead of leaving a counter one too high for every later run.

#include <chrono>
#include <string>

#include "dlock/dlock.hpp"

namespace example {

class PaymentStep {
 public:
  // `permit_lease` is the lease of the semaphore's permits (lock.watchdog_timeout_ms).
  // `limited` false pays without the semaphore even with the lock on (--unlimited-payments), to see the check fail.
  // `call_takes`: how long the provider takes per call (--payment-ms); shorter than a third of the lease.
  PaymentStep(const std::string& sale, long long slots, std::chrono::milliseconds permit_lease, bool limited = true,
              std::chrono::milliseconds call_takes = std::chrono::milliseconds(2));

  // Clears the counts of an earlier run.
  void reset(dlock::RedisExecutor& redis) const;
  // Gives the semaphore this run's N: a semaphore keeps its count across runs until it is set.
  void open(dlock::RedisLockService& service) const {
    if (slots_ > 0) service.semaphore(semaphore_, slots_).set_permits(slots_);
  }
  // One payment call: under a permit of the semaphore, or without one (--no-lock, --unlimited-payments).
  void pay(dlock::RedisLockService& service, dlock::RedisExecutor& redis, bool use_lock) const;
  // Prints "payment_slots=N payment_peak=P"; true when P ≤ N.
  bool report(dlock::RedisExecutor& redis) const;

 private:
  void call_provider(dlock::RedisExecutor& redis) const;

  // The calls key and the peak key share a hash tag: one script touches both, in a Redis Cluster too.
  std::string semaphore_, calls_key_, peak_key_;
  long long slots_;
  bool limited_;
  // How long a call counts if its process dies before it ends: a third of
  // the permit's lease. The watchdog renews a permit every third of its
  // lease, so a dead caller's permit outlives the call's start by more than
  // that (a renewal may even run a third late): a dead call stops counting
  // before its permit can go to a live call. And far longer than a call lasts.
  std::chrono::milliseconds call_counts_for_;
  std::chrono::milliseconds call_takes_;
};

}  // namespace example
