#pragma once
// MultiLockGuard: the move-only RAII handle of a set of locks taken together
// by RedisLockService::lock_all (Redisson's RedissonMultiLock). It holds
// every key of the set, or nothing: one LockGuard per key, each re-entrant,
// renewed and fenced as a lock taken alone, released together (last taken
// first), from any thread.

#include <cstdint>
#include <memory>
#include <stop_token>
#include <string_view>
#include <vector>

#include "dlock/lock_guard.hpp"
#include "dlock/lock_options.hpp"

namespace dlock {

class RedisLockService;
namespace detail {
class SetAcquisition;
}

class MultiLockGuard {
 public:
  MultiLockGuard() = default;  // empty: holds nothing
  MultiLockGuard(MultiLockGuard&& other) noexcept = default;
  // Releases what this guard held first (errors are logged, not thrown).
  MultiLockGuard& operator=(MultiLockGuard&& other) noexcept;
  MultiLockGuard(const MultiLockGuard&) = delete;
  MultiLockGuard& operator=(const MultiLockGuard&) = delete;
  // Releases every lock still held, the last taken first. Never throws.
  ~MultiLockGuard();

  // True iff it holds a set, not yet released, and no lock of it is lost().
  explicit operator bool() const;

  // The locks of the set, one per key, in the order they were taken (the
  // keys sorted bytewise): each is a LockGuard as lock() returns it.
  const std::vector<LockGuard>& guards() const { return guards_; }
  std::size_t size() const { return guards_.size(); }

  // The lock of `key` in this set. Throws InvalidArgument if the set has no such key.
  const LockGuard& guard(std::string_view key) const;
  // guard(key).fencing_token(): every key has its own counter, so its own token.
  std::uint64_t fencing_token(std::string_view key) const;

  // True once any lock of the set is lost (see LockGuard::lost()).
  bool lost() const;
  // Throws LockLostError, naming the lost key, if lost().
  void check() const;
  // Stop is requested as soon as any lock of the set is lost.
  std::stop_token stop_token() const;
  // The least validity left among the set's locks.
  Millis remaining() const;

  // Releases every lock of the set now, the last taken first. Idempotent. If
  // some releases fail, the others are still released and the first failure
  // is thrown (LockLostError or ConnectionError, as LockGuard::unlock()).
  void unlock();

  // Lets go of every lock without releasing it (LockGuard::detach()).
  void detach();

 private:
  friend class RedisLockService;
  friend class detail::SetAcquisition;
  explicit MultiLockGuard(std::vector<LockGuard> guards);

  struct LossSignal;
  std::vector<LockGuard> guards_;
  std::shared_ptr<LossSignal> loss_;  // forwards each lock's stop request to the set's
};

}  // namespace dlock
