#pragma once
// The flash sale's simulated payment step: a provider that accepts at most
// N calls at once across every process, enforced by a distributed semaphore
// (WITH_DISTRIBUTED_PERMIT). Each call counts itself in Redis while it runs
// and records the highest count seen, so the sale can show the limit held.
// With 0 slots there is no payment step.

#include <string>

#include "dlock/dlock.hpp"

namespace example {

class PaymentStep {
 public:
  PaymentStep(const std::string& sale, long long slots)
      : semaphore_("payments:" + sale), inflight_key_("payments:" + sale + ":inflight"),
        peak_key_("payments:" + sale + ":peak"), slots_(slots) {}

  // Clears the counts of an earlier run.
  void reset(dlock::RedisExecutor& redis) const;
  // Gives the semaphore this run's N: a semaphore keeps its count across runs until it is set.
  void open(dlock::RedisLockService& service) const {
    if (slots_ > 0) service.semaphore(semaphore_, slots_).set_permits(slots_);
  }
  // One payment call: under a permit of the semaphore, or without one (--no-lock).
  void pay(dlock::RedisLockService& service, dlock::RedisExecutor& redis, bool use_lock) const;
  // Prints "payment_slots=N payment_peak=P"; true when P ≤ N.
  bool report(dlock::RedisExecutor& redis) const;

 private:
  void call_provider(dlock::RedisExecutor& redis) const;

  std::string semaphore_, inflight_key_, peak_key_;
  long long slots_;
};

}  // namespace example
