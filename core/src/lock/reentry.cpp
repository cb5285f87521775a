// Re-entry: a thread taking again a lock it holds sets the hold count in
// Redis one higher, after waiting out another thread's change to that hold.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "dlock/detail/service_core.hpp"
#include "dlock/errors.hpp"
#include "lock/script_replies.hpp"

namespace dlock::detail {

std::shared_ptr<HeldLock> ServiceCore::find_live(const std::string& held) const {
  std::lock_guard guard(mutex_);
  auto it = held_.find(held);
  if (it == held_.end() || it->second->is_lost()) return nullptr;
  return it->second;
}

std::optional<LockGuard> ServiceCore::reenter(const std::shared_ptr<HeldLock>& lock, Millis lease, bool renewed,
                                              Clock::time_point called, Clock::time_point deadline,
                                              bool throw_on_timeout) {
  // A guard of this hold moved to another thread may be releasing it there:
  // one round trip, usually, which even a try without a wait waits for (a
  // thread re-entering its own lock must not fail for that), but repeated
  // through an outage or BUSY for up to the hold's validity, which a caller
  // waits for only within its own wait.
  std::unique_lock io(lock->io, std::defer_lock);
  const Clock::time_point io_deadline = std::max(deadline, called + kOtherThreadsRoundTrip);
  if (!io.try_lock_until(io_deadline)) {
    (deadline == called ? stats_.busy : stats_.timeouts).fetch_add(1, std::memory_order_relaxed);
    if (!throw_on_timeout) return LockGuard{};
    throw LockTimeoutError(lock->label() + ": this thread holds it, but another thread was changing that hold in "
                           "Redis (releasing a guard moved to it) for all of " +
                           std::to_string(std::chrono::duration_cast<Millis>(io_deadline - called).count()) +
                           " ms this call could wait; wait longer (LockOptions::wait or lock.wait_ms)");
  }
  int holds = 0;
  {
    std::lock_guard guard(mutex_);
    if (lock->holds == 0 || lock->lost_flag.load()) return std::nullopt;  // released or lost while waiting for io
    holds = lock->holds;
  }
  const std::string lease_arg = std::to_string(lease.count());
  const std::string count_arg = std::to_string(holds + 1);
  const std::array<std::string_view, 1> keys{lock->lock_name};
  const std::array<std::string_view, 3> args{lock->owner, lease_arg, count_arg};
  Clock::time_point sent;
  bool acknowledged = false;  // with lock.replica_acks, whether enough replicas have the lease it extended
  for (;;) {
    sent = Clock::now();
    RedisReply reply;
    try {
      // With lock.replica_acks a WAIT follows: the lease it extends counts only once acknowledged.
      reply = scripts_.run_acknowledged(kRenewScript, keys, args, &is_hold_kept);
      throw_if_transient(lock->key, reply, "re-enter");
    } catch (const AuthenticationError&) {
      throw;  // a refused login is not an outage: waiting does not end it
    } catch (const ConnectionError&) {
      // The count is set, not added to: a try repeated after a lost reply counts once.
      const Clock::time_point now = Clock::now();
      if (now >= deadline) throw;
      std::this_thread::sleep_for(std::min(kOutageRetry, std::chrono::ceil<Millis>(deadline - now)));
      continue;
    }
    if (is_hold_kept(reply) || is_unacknowledged(reply)) {  // re-entered, acknowledged or not
      acknowledged = is_hold_kept(reply);
      break;
    }
    if (is_integer(reply, 0)) {
      io.unlock();
      handle_lost(lock, "a re-entry found it no longer this owner's (its lease ran out, or it was deleted)");
      return std::nullopt;
    }
    throw_reply_error(lock->key, names_for(lock->key), reply, "re-enter");
  }
  std::shared_ptr<Hold> hold;
  bool watch = false;
  {
    std::lock_guard guard(mutex_);
    stats_.reentered.fetch_add(1, std::memory_order_relaxed);
    ++lock->holds;
    if (renewed && !lock->renewed.exchange(true)) {
      lock->lease_ms = lease.count();
      watch = true;
    } else if (!lock->renewed.load()) {
      lock->lease_ms = std::max<std::int64_t>(lock->lease_ms.load(), lease.count());
    }
    // With lock.replica_acks only an acknowledged write extends the validity.
    if (acknowledged) lock->extend_validity(sent, lease);
    hold = std::make_shared<Hold>(lock);
    lock->stack.push_back(hold);
  }
  io.unlock();
  if (watch) watchdog_.watch(lock, sent);
  stats_.record_acquire_latency(Clock::now() - called);
  return LockGuard(shared_from_this(), std::move(hold));
}

}  // namespace dlock::detail
