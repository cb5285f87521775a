#pragma once
// lock_all's rules as steps, written once for the blocking call and the
// async one (async_lock_all): which key to take next and with how much of
// the set's wait, what a key's failure means for the set, when a key lost
// while the rest were taken makes the set start again.
//
// Why this way: taking the keys sorted means a caller waiting for a key holds
// only keys that sort before it, so no cycle of waiters can form, whatever
// order callers list their keys in, in every mode (the keys of a set may sit
// on different cluster nodes, so one script cannot take them all). Each key
// is a plain lock, so re-entry, the fair line, renewal and fencing are the
// lock's own.

#include <exception>
#include <string>
#include <vector>

#include "dlock/detail/service_core.hpp"
#include "dlock/lock_guard.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/multi_lock_guard.hpp"

namespace dlock::detail {

class SetAcquisition {
 public:
  // Sorts the keys; throws InvalidArgument, before any round trip, for an
  // empty set, a key given twice, or a key or option lock() would refuse.
  SetAcquisition(ServiceCore& core, std::vector<std::string> keys, LockOptions options, bool throw_on_timeout);

  struct Step {
    enum class Kind { take, pause, done };
    Kind kind = Kind::done;
    const std::string* key = nullptr;  // take: this key, with these options (the set's wait left)
    LockOptions options;
    Millis pause{0};                   // pause: then next() again
  };
  Step next();
  // The key of the last Step::take was had.
  void took(LockGuard guard);
  // The key of the last Step::take failed with `error`: the keys taken are
  // released, and the set's error thrown (LockTimeoutError in the set's
  // words), or for the try form an empty guard returned.
  MultiLockGuard failed(std::exception_ptr error);
  // After Step::done: the set, or (the try form, out of time) an empty guard;
  // throws LockTimeoutError when the set ran out of time starting again.
  MultiLockGuard result();
  // Gives back what was taken (the last taken first).
  void release_taken();

 private:
  std::vector<std::string> keys_;
  const LockOptions options_;
  const bool throw_on_timeout_;
  Millis wait_{0};
  Clock::time_point deadline_;
  std::vector<LockGuard> taken_;
  Millis last_left_{0};        // the set's wait left when the last key was asked for
  Millis restart_pause_{10};
  bool restarting_ = false;    // a key was lost: release, pause, start again
  bool after_pause_ = false;   // the pause is over: out of time, or the first key again
  bool out_of_time_ = false;
};

}  // namespace dlock::detail
