// The multi-lock block forms' guard: a set taken with lock_all or try_lock_all, released
// with unlock() on a normal exit so that a lock of the set lost meanwhile throws.
#include "dlock/detail/block_multi_guard.hpp"

#include <exception>
#include <utility>

namespace dlock::detail {

BlockMultiGuard::BlockMultiGuard(MultiLockGuard guard, bool throw_if_lost)
    : MultiLockGuard(std::move(guard)),
      throw_if_lost_(throw_if_lost),
      exceptions_at_entry_(std::uncaught_exceptions()) {}

BlockMultiGuard BlockMultiGuard::lock(RedisLockService& service, const BlockKeysRequest& request) {
  return BlockMultiGuard(service.lock_all(request.keys, request.options.lock_options()),
                         request.options.throw_if_lost);
}

BlockMultiGuard BlockMultiGuard::try_lock(RedisLockService& service, const BlockKeysRequest& request) {
  return BlockMultiGuard(service.try_lock_all(request.keys, request.options.lock_options()),
                         request.options.throw_if_lost);
}

BlockMultiGuard::~BlockMultiGuard() noexcept(false) {
  if (!throw_if_lost_ || std::uncaught_exceptions() > exceptions_at_entry_) return;  // released quietly
  unlock();
}

}  // namespace dlock::detail
