// RedisLockService::lock_all: a set of locks taken in one global order.
//
// Why this way: taking the keys sorted means a caller waiting for a key holds
// only keys that sort before it, so no cycle of waiters can form, whatever
// order callers list their keys in, in every mode (the keys of a set may sit
// on different cluster nodes, so one script cannot take them all). Each key
// is a plain lock, so re-entry, the fair line, renewal and fencing are the
// lock's own.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "dlock/detail/key_label.hpp"
#include "dlock/detail/service_core.hpp"
#include "dlock/errors.hpp"
#include "dlock/lock_service.hpp"

namespace dlock {

namespace {

// Releases the keys already taken, the last taken first, before a failed set returns or throws.
void release_taken(std::vector<LockGuard>& taken) {
  while (!taken.empty()) taken.pop_back();
}

}  // namespace

MultiLockGuard RedisLockService::acquire_all(std::vector<std::string> keys, LockOptions options,
                                             bool throw_on_timeout) {
  const auto core = core_;
  if (keys.empty()) throw InvalidArgument("lock_all: the set of keys is empty; pass at least one key");
  std::sort(keys.begin(), keys.end());
  if (auto twice = std::adjacent_find(keys.begin(), keys.end()); twice != keys.end()) {
    throw InvalidArgument("lock_all: " + detail::lock_label(*twice) +
                          " is in the set twice; pass each key once (a lock already held is re-entered anyway)");
  }
  for (const std::string& key : keys) core->validate(key, options);

  // Without a wait: lock.wait_ms for lock_all, once per key for try_lock_all (as lock() and try_lock()).
  const Millis wait = options.wait.value_or(throw_on_timeout ? core->config().wait : Millis(0));
  const detail::Clock::time_point deadline = detail::Clock::now() + wait;
  std::vector<LockGuard> taken;
  taken.reserve(keys.size());
  Millis restart_pause{10};
  for (;;) {
    bool whole = true;
    for (const std::string& key : keys) {
      const auto left = std::max(Millis(0), std::chrono::ceil<Millis>(deadline - detail::Clock::now()));
      LockOptions one = options;
      one.wait = left;
      LockGuard guard;
      try {
        // With throw_on_timeout, so that a wait that runs out says why, in the words lock() would use.
        guard = core->acquire(key, one, true);
      } catch (const LockTimeoutError& e) {
        const std::size_t had = taken.size();
        release_taken(taken);
        if (!throw_on_timeout) return {};
        const std::string released = "; the " + std::to_string(had) +
                                     " key(s) taken before it were released, so none of the set is held";
        const std::string which = "lock_all: key " + std::to_string(had + 1) + " of " + std::to_string(keys.size()) +
                                  " (sorted), " + detail::lock_label(key);
        // The set's wait spent on the keys before it: this key was tried once, by no wait of the caller's choosing.
        if (wait.count() > 0 && left.count() == 0) {
          throw LockTimeoutError(which + ", was still busy when the set's wait of " + std::to_string(wait.count()) +
                                 " ms ran out" + released + "; try again later or pass a longer wait");
        }
        throw LockTimeoutError(which + ": " + e.what() + released);
      } catch (...) {  // Redis unreachable, a key of another type: none of the set stays held
        release_taken(taken);
        throw;
      }
      // A guard that is false but names its key was granted and lost at once (its grant came back already
      // expired): that key is taken again below, with the rest.
      taken.push_back(std::move(guard));
      // A key taken earlier may have been lost while this one was waited for (its fixed lease ran out, or
      // it was deleted): the set is not whole, and another owner may hold that key now. Start again.
      if (std::any_of(taken.begin(), taken.end(), [](const LockGuard& g) { return g.lost(); })) {
        whole = false;
        break;
      }
    }
    if (whole) break;
    release_taken(taken);
    // A pause before taking the set again, growing, so a lease too short to outlast the set's taking
    // (each key lost as soon as it is had) does not make this a busy loop against Redis until the wait ends.
    std::this_thread::sleep_for(std::min(restart_pause, std::chrono::ceil<Millis>(deadline - detail::Clock::now())));
    restart_pause = std::min(restart_pause * 2, Millis(200));
    if (detail::Clock::now() >= deadline) {
      if (!throw_on_timeout) return {};
      throw LockTimeoutError("lock_all: a key of the set was lost while the rest were waited for, and the set's "
                             "wait of " + std::to_string(wait.count()) + " ms ran out before it was taken whole "
                             "again; none of the set is held. Give fixed leases that outlast the wait, or wait "
                             "longer");
    }
  }
  return MultiLockGuard(std::move(taken));
}

}  // namespace dlock
