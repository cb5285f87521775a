#pragma once
// One client's uncontended lock+unlock cycle on a key of its own, chosen by
// name: what `dlock-bench --cycles CLIENT` and the peers part time. Every
// client takes its lock with a 30 s lease (dlock: its watchdog lease), one
// thread, one connection's worth of round trips per call.

#include <memory>
#include <string>
#include <vector>

#include "bench_target.hpp"

namespace bench {

class LockCycle {
 public:
  virtual ~LockCycle() = default;
  // One acquire and its release. Throws std::runtime_error if the lock was
  // refused or the release found it gone: the key is this client's alone.
  virtual void run() = 0;
};

// "dlock", "ideal", "minimal-pair", "bare", in the order the peers part runs them.
const std::vector<std::string>& lock_cycle_names();

// Connects the named client to target. Throws std::invalid_argument for a
// name not in lock_cycle_names().
std::unique_ptr<LockCycle> make_lock_cycle(const std::string& name, const Target& target);

// Runs cycle back to back for `seconds` (after 100 untimed warm-up cycles)
// and returns cycles per second.
double cycles_per_second(LockCycle& cycle, double seconds);

}  // namespace bench
