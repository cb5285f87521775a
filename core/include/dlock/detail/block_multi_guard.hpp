#pragma once
// The guard behind the multi-lock block forms (macros.hpp): a MultiLockGuard
// that, with BlockOptions::throw_if_lost, releases with unlock() as its scope
// is left normally, so a lock of the set lost while the body ran ends the
// block in LockLostError. Left by an exception, it releases quietly.

#include "dlock/detail/block_keys_request.hpp"
#include "dlock/lock_service.hpp"
#include "dlock/multi_lock_guard.hpp"

namespace dlock::detail {

class BlockMultiGuard : public MultiLockGuard {
 public:
  static BlockMultiGuard lock(RedisLockService& service, const BlockKeysRequest& request);
  static BlockMultiGuard try_lock(RedisLockService& service, const BlockKeysRequest& request);

  BlockMultiGuard(const BlockMultiGuard&) = delete;
  BlockMultiGuard& operator=(const BlockMultiGuard&) = delete;
  ~BlockMultiGuard() noexcept(false);

 private:
  BlockMultiGuard(MultiLockGuard guard, bool throw_if_lost);

  const bool throw_if_lost_;
  const int exceptions_at_entry_;
};

}  // namespace dlock::detail
