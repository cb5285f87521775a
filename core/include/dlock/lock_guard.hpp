#pragma once
// LockGuard: the move-only RAII handle of ONE granted hold, like
// std::unique_lock. It carries its owner token, so it may be released from
// any thread (async code that finishes elsewhere).

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "dlock/lock_options.hpp"
#include "dlock/owner.hpp"

namespace dlock {

namespace detail {
class ServiceCore;
struct Hold;
}  // namespace detail

class LockGuard {
 public:
  LockGuard() = default;  // empty: holds nothing
  LockGuard(LockGuard&& other) noexcept = default;
  // Releases what this guard held first (errors are logged, not thrown).
  LockGuard& operator=(LockGuard&& other) noexcept;
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  // Releases the hold if still held. Never throws: a failed release is logged,
  // and the lock then expires by itself within its lease. A lock found lost
  // is not logged again here: its loss was logged once, when it was found.
  ~LockGuard();

  // True iff acquired, not yet released, and not lost(). A moved-from or
  // empty guard is false.
  explicit operator bool() const;

  // The user key as passed to lock() (no prefix); empty for an empty guard.
  const std::string& key() const;

  // The value drawn from the lock's fencing counter when this acquisition
  // first took the lock; the same for every re-entrant hold of it. Greater
  // than any earlier grant's through the same Redis, under the conditions in
  // lock_service.hpp (the server's clock never goes back; no failover to a
  // replica that missed the latest grants): pass it to the resource you
  // protect so it can refuse writes from a holder paused past its lease.
  // 0 for an empty guard. Over a Redlock (redis.mode: redlock) it is the
  // largest of the granting majority's counters, and the first call raises
  // every node's counter to it (one round trip): it throws LockLostError if
  // no majority still held the lock, and ConnectionError if too few nodes
  // answered. See docs/deployments.md, "Redlock", for what it promises there.
  std::uint64_t fencing_token() const;

  // True once the lock stopped being this holder's: the watchdog found it
  // gone, renewals failed until its validity ran out, or a fixed lease ran
  // out by the local clock.
  bool lost() const;

  // Throws LockLostError if lost(); use it before an irreversible step.
  void check() const;

  // Stop is requested when the lock is lost, so long work can give up
  // cooperatively. An empty guard's token never stops.
  std::stop_token stop_token() const;

  // Validity left by the local clock: lease − elapsed − clock-drift margin.
  Millis remaining() const;

  // The owner this hold belongs to: pass it in LockOptions::owner so that a
  // callee (a child coroutine, another thread) re-enters this lock instead
  // of waiting for it. Throws InvalidArgument for an empty guard.
  Owner owner() const;

  // Releases THIS hold now. Idempotent. Throws LockLostError (and leaves
  // another owner's lock untouched) if the lock was no longer this owner's,
  // or was lost() by the local clock, whether or not the watchdog had said so
  // yet — the critical section may have overlapped another holder; throws
  // ConnectionError if Redis could not be told (the lock then expires within
  // its lease).
  void unlock();

  // Lets go of this hold WITHOUT releasing it: the guard becomes empty, the
  // watchdog stops renewing, and the lock stays in Redis until its lease runs
  // out. For work that must not run again before then, such as a scheduled
  // job that one instance runs per period ("lock at least for"). Idempotent.
  void detach();

  // unlock() on one of dlock's I/O threads (the async API's release): the
  // guard is empty at once; `done` is called there with what unlock() threw,
  // or none (an empty guard: at once, here). Without `done`, a failed release
  // is logged, as the destructor logs it. `keep_alive`, if given, is dropped
  // once the release is over (an Asio work guard keeps its loop running until then).
  void release_elsewhere(std::function<void(std::exception_ptr)> done, std::shared_ptr<void> keep_alive = nullptr);

 private:
  friend class detail::ServiceCore;
  LockGuard(std::shared_ptr<detail::ServiceCore> service, std::shared_ptr<detail::Hold> hold);

  std::shared_ptr<detail::ServiceCore> service_;  // keeps the service's internals alive for release
  std::shared_ptr<detail::Hold> hold_;
};

}  // namespace dlock
