#pragma once
// Semaphore: a handle (by value, cheap to copy) on a distributed counting
// semaphore, Redisson's RPermitExpirableSemaphore: at most `permits` permits
// are held at once across every thread, process and host sharing the Redis.
//
//   auto payments = service->semaphore("payments", 10);
//   auto permit = payments.acquire();          // a guard for 1 permit; released when it goes
//   WITH_DISTRIBUTED_PERMIT(payments) { call_provider(); }
//
// Each acquisition is a hold of its own (permits are never re-entered): a
// guard for n permits, renewed by the watchdog while it lives, or with a
// fixed lease; a holder that dies gives its permits back when its lease runs
// out. Waiters are served strictly in arrival order, so a request for many
// permits is never passed by smaller ones behind it; they sleep on a notice
// published when permits come back. The count lives in Redis
// (P{name}:semaphore): the first acquisition creates it with the handle's
// count, and it stays until changed with set_permits().

#include <memory>
#include <string>
#include <string_view>

#include "dlock/detail/async_acquire.hpp"
#include "dlock/lock_guard.hpp"
#include "dlock/lock_options.hpp"

namespace dlock {

namespace detail {
class ServiceCore;
}

class Semaphore {
 public:
  const std::string& name() const { return name_; }

  // Blocks until `permits` permits are free and every earlier waiter was
  // served, or the wait (options.wait, else lock.wait_ms) runs out: then
  // LockTimeoutError. InvalidArgument for permits < 1 or more than the
  // semaphore's count (also one lowered by set_permits while waiting), or a
  // semaphore with no count (made without one, never created).
  LockGuard acquire(long long permits = 1, LockOptions options = {}) const;
  // As acquire(), but an empty guard instead of LockTimeoutError; without a
  // wait it tries once, and never takes permits while anyone waits in line.
  LockGuard try_acquire(long long permits = 1, LockOptions options = {}) const;

  // Sets the count in Redis now, for every handle. Holders keep their
  // permits; with fewer permits than held, new acquisitions wait until enough
  // come back. Waiters are woken (more permits may let them in).
  void set_permits(long long permits) const;
  // The count in Redis, or this handle's count if none is set yet.
  long long permits() const;
  // Permits free now: the count less those held by live holders (0 if more are held). A permit whose
  // guard this service released is free here at once: the call follows that release (whose reply a
  // destructor does not wait for) into Redis. Another process may see it a moment later.
  long long available() const;

  // The async API's entry for acquire()/try_acquire() (<dlock/asio.hpp>): see RedisLockService::start_async.
  std::shared_ptr<detail::AsyncOperation> start_async(long long permits, LockOptions options, bool throw_on_timeout,
                                                      detail::AsyncDone done) const;

 private:
  friend class RedisLockService;
  Semaphore(std::shared_ptr<detail::ServiceCore> core, std::string name, long long count_if_new)
      : core_(std::move(core)), name_(std::move(name)), count_if_new_(count_if_new) {}

  std::shared_ptr<detail::ServiceCore> core_;
  std::string name_;
  long long count_if_new_;  // 0: the semaphore must already have a count
};

}  // namespace dlock
