#pragma once
// The guard behind the block and scope forms (macros.hpp): a LockGuard that,
// when its options ask for it (BlockOptions::throw_if_lost), releases with
// LockGuard::unlock() as its scope is left normally, so that a lock lost
// while the body ran ends the block in LockLostError rather than a log line.
// Left by an exception, it releases quietly, as a LockGuard does: never a
// second exception.

#include "dlock/detail/block_request.hpp"
#include "dlock/lock_guard.hpp"
#include "dlock/lock_service.hpp"

namespace dlock::detail {

class BlockGuard : public LockGuard {
 public:
  // The lock of `request` from `service`: lock() throws LockTimeoutError when
  // it is not had within the wait; try_lock() returns an empty guard instead
  // (without a wait in the options it tries once).
  static BlockGuard lock(RedisLockService& service, const BlockRequest& request);
  static BlockGuard try_lock(RedisLockService& service, const BlockRequest& request);
  // The read or write lock of `request` (RedisLockService::read_lock/write_lock).
  static BlockGuard read_lock(RedisLockService& service, const BlockRequest& request);
  static BlockGuard write_lock(RedisLockService& service, const BlockRequest& request);
  // One permit of a semaphore: a handle, or a name whose count Redis has
  // (the service is asked for only with a name).
  template <typename ServiceOf>
  static BlockGuard permit(ServiceOf&&, const Semaphore& semaphore, BlockOptions options = {}) {
    return BlockGuard(semaphore.acquire(1, options.lock_options()), options.throw_if_lost);
  }
  template <typename ServiceOf>
  static BlockGuard permit(ServiceOf&& service_of, std::string_view name, BlockOptions options = {}) {
    return BlockGuard(service_of().semaphore(name).acquire(1, options.lock_options()), options.throw_if_lost);
  }

  BlockGuard(const BlockGuard&) = delete;
  BlockGuard& operator=(const BlockGuard&) = delete;
  // May throw (throw_if_lost), but only when no exception is already on its way.
  ~BlockGuard() noexcept(false);

 private:
  BlockGuard(LockGuard guard, bool throw_if_lost);

  const bool throw_if_lost_;
  const int exceptions_at_entry_;  // std::uncaught_exceptions() when made: more at the end means unwinding
};

}  // namespace dlock::detail
