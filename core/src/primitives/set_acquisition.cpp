// lock_all's steps (set_acquisition.hpp) and the blocking lock_all that runs them.
#include "primitives/set_acquisition.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "dlock/detail/key_label.hpp"
#include "dlock/errors.hpp"
#include "dlock/lock_service.hpp"

namespace dlock {
namespace detail {

SetAcquisition::SetAcquisition(ServiceCore& core, std::vector<std::string> keys, LockOptions options,
                               bool throw_on_timeout)
    : keys_(std::move(keys)), options_(std::move(options)), throw_on_timeout_(throw_on_timeout) {
  if (keys_.empty()) throw InvalidArgument("lock_all: the set of keys is empty; pass at least one key");
  std::sort(keys_.begin(), keys_.end());
  if (auto twice = std::adjacent_find(keys_.begin(), keys_.end()); twice != keys_.end()) {
    throw InvalidArgument("lock_all: " + lock_label(*twice) +
                          " is in the set twice; pass each key once (a lock already held is re-entered anyway)");
  }
  for (const std::string& key : keys_) core.validate(key, options_);
  // Without a wait: lock.wait_ms for lock_all, once per key for try_lock_all (as lock() and try_lock()).
  wait_ = options_.wait.value_or(throw_on_timeout_ ? core.config().wait : Millis(0));
  deadline_ = Clock::now() + wait_;
  taken_.reserve(keys_.size());
}

SetAcquisition::Step SetAcquisition::next() {
  Step step;
  if (restarting_) {
    // A pause before taking the set again, growing, so a lease too short to outlast the set's taking
    // (each key lost as soon as it is had) does not make this a busy loop against Redis until the wait ends.
    release_taken();
    restarting_ = false;
    after_pause_ = true;
    step.kind = Step::Kind::pause;
    step.pause = std::min(restart_pause_, std::max(Millis(0), std::chrono::ceil<Millis>(deadline_ - Clock::now())));
    restart_pause_ = std::min(restart_pause_ * 2, Millis(200));
    return step;
  }
  if (after_pause_) {
    after_pause_ = false;
    if (Clock::now() >= deadline_) {
      out_of_time_ = true;
      return step;
    }
  }
  if (taken_.size() == keys_.size()) return step;
  step.kind = Step::Kind::take;
  step.key = &keys_[taken_.size()];
  step.options = options_;
  last_left_ = std::max(Millis(0), std::chrono::ceil<Millis>(deadline_ - Clock::now()));
  step.options.wait = last_left_;
  // With throw_on_timeout, so that a wait that runs out says why, in the words lock() would use.
  return step;
}

void SetAcquisition::took(LockGuard guard) {
  // A guard that is false but names its key was granted and lost at once (its grant came back already
  // expired): that key is taken again below, with the rest.
  taken_.push_back(std::move(guard));
  // A key taken earlier may have been lost while this one was waited for (its fixed lease ran out, or
  // it was deleted): the set is not whole, and another owner may hold that key now. Start again.
  restarting_ = std::any_of(taken_.begin(), taken_.end(), [](const LockGuard& g) { return g.lost(); });
}

MultiLockGuard SetAcquisition::failed(std::exception_ptr error) {
  const std::size_t had = taken_.size();
  const std::string& key = keys_[had];
  release_taken();  // Redis unreachable, a key of another type, out of time: none of the set stays held
  try {
    std::rethrow_exception(error);
  } catch (const LockTimeoutError& e) {
    if (!throw_on_timeout_) return {};
    const std::string released = "; the " + std::to_string(had) +
                                 " key(s) taken before it were released, so none of the set is held";
    const std::string which = "lock_all: key " + std::to_string(had + 1) + " of " + std::to_string(keys_.size()) +
                              " (sorted), " + lock_label(key);
    // The set's wait spent on the keys before it: this key was tried once, by no wait of the caller's choosing.
    if (wait_.count() > 0 && last_left_.count() == 0) {
      throw LockTimeoutError(which + ", was still busy when the set's wait of " + std::to_string(wait_.count()) +
                             " ms ran out" + released + "; try again later or pass a longer wait");
    }
    throw LockTimeoutError(which + ": " + e.what() + released);
  }
}

MultiLockGuard SetAcquisition::result() {
  if (!out_of_time_) return MultiLockGuard(std::move(taken_));
  if (!throw_on_timeout_) return {};
  throw LockTimeoutError("lock_all: a key of the set was lost while the rest were waited for, and the set's "
                         "wait of " + std::to_string(wait_.count()) + " ms ran out before it was taken whole "
                         "again; none of the set is held. Give fixed leases that outlast the wait, or wait "
                         "longer");
}

void SetAcquisition::release_taken() {
  while (!taken_.empty()) taken_.pop_back();
}

}  // namespace detail

MultiLockGuard RedisLockService::acquire_all(std::vector<std::string> keys, LockOptions options,
                                             bool throw_on_timeout) {
  const auto core = core_;
  detail::SetAcquisition set(*core, std::move(keys), std::move(options), throw_on_timeout);
  for (;;) {
    detail::SetAcquisition::Step step = set.next();
    switch (step.kind) {
      case detail::SetAcquisition::Step::Kind::take:
        try {
          set.took(core->acquire(*step.key, step.options, true));
        } catch (...) {
          return set.failed(std::current_exception());
        }
        break;
      case detail::SetAcquisition::Step::Kind::pause:
        std::this_thread::sleep_for(step.pause);
        break;
      case detail::SetAcquisition::Step::Kind::done:
        return set.result();
    }
  }
}

}  // namespace dlock
