// The block and scope forms' guard: each kind of lock taken into a BlockGuard, and the
// release on a normal exit that turns a lock lost in the body into LockLostError.
#include "dlock/detail/block_guard.hpp"

#include <exception>
#include <utility>

namespace dlock::detail {

BlockGuard::BlockGuard(LockGuard guard, bool throw_if_lost)
    : LockGuard(std::move(guard)), throw_if_lost_(throw_if_lost), exceptions_at_entry_(std::uncaught_exceptions()) {}

BlockGuard BlockGuard::lock(RedisLockService& service, const BlockRequest& request) {
  return BlockGuard(service.lock(request.key, request.options.lock_options()), request.options.throw_if_lost);
}

BlockGuard BlockGuard::try_lock(RedisLockService& service, const BlockRequest& request) {
  return BlockGuard(service.try_lock(request.key, request.options.lock_options()), request.options.throw_if_lost);
}

BlockGuard BlockGuard::read_lock(RedisLockService& service, const BlockRequest& request) {
  return BlockGuard(service.read_lock(request.key, request.options.lock_options()), request.options.throw_if_lost);
}

BlockGuard BlockGuard::write_lock(RedisLockService& service, const BlockRequest& request) {
  return BlockGuard(service.write_lock(request.key, request.options.lock_options()), request.options.throw_if_lost);
}

BlockGuard::~BlockGuard() noexcept(false) {
  if (!throw_if_lost_ || std::uncaught_exceptions() > exceptions_at_entry_) return;  // ~LockGuard releases quietly
  unlock();  // a no-op if the body already released or detached it
}

}  // namespace dlock::detail
