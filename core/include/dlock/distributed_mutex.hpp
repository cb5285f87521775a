#pragma once
// DistributedMutex: one distributed lock as a standard Lockable, so that
// std::scoped_lock, std::unique_lock and std::lock work with it:
//
//   dlock::DistributedMutex stock(service, "stock:42");
//   {
//     std::scoped_lock hold(stock);       // lock(): waits as RedisLockService::lock does
//     write_stock(stock.fencing_token());
//   }                                     // unlock()
//
// Re-entrant per thread, as the service is: a thread may lock it again, and
// only its last unlock() frees the lock. Every thread has its own holds; a
// thread unlocks only what it locked.
//
// The standard requires unlock() not to throw, so a release that fails is
// logged (as a LockGuard's destructor does) and the lock then expires by
// itself within its lease. To learn of a loss, call check() before an
// irreversible step (it throws LockLostError), or use the service's
// LockGuard, whose unlock() throws.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dlock/lock_guard.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/lock_service.hpp"

namespace dlock {

class DistributedMutex {
 public:
  // `options` apply to lock(): its wait (unset: lock.wait_ms of the service's
  // config) and lease (unset: watchdog-renewed). try_lock() tries once.
  // Throws InvalidArgument for a null service or an empty key.
  DistributedMutex(std::shared_ptr<RedisLockService> service, std::string key, LockOptions options = {});
  // The caller keeps `service` alive for as long as this mutex.
  DistributedMutex(RedisLockService& service, std::string key, LockOptions options = {});
  // Releases whatever holds are left (errors are logged, not thrown).
  ~DistributedMutex();
  DistributedMutex(const DistributedMutex&) = delete;
  DistributedMutex& operator=(const DistributedMutex&) = delete;

  // Blocks until held, as RedisLockService::lock: throws LockTimeoutError
  // when the wait runs out (then std::scoped_lock, std::unique_lock and
  // std::lock propagate it, holding nothing), and whatever lock() throws.
  void lock();
  // Tries once; true if now held by this thread. Throws as lock() does for
  // anything but a busy lock.
  bool try_lock();
  // Waits at most `timeout` (TimedLockable, for std::unique_lock::try_lock_for).
  template <typename Rep, typename Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    return try_lock_waiting(std::chrono::ceil<Millis>(timeout));
  }
  template <typename Clock, typename Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return try_lock_for(deadline - Clock::now());
  }
  // Releases this thread's most recent hold. Never throws (see above); does
  // nothing if this thread holds none.
  void unlock() noexcept;

  const std::string& key() const { return key_; }
  // This thread's re-entry depth on this mutex; 0 when it holds none.
  int hold_count() const;
  // The fencing token of this thread's hold; 0 when it holds none.
  std::uint64_t fencing_token() const;
  // Throws LockLostError if this thread's hold was lost (see LockGuard::check).
  void check() const;

 private:
  bool try_lock_waiting(Millis wait);
  void push(LockGuard guard);

  std::shared_ptr<RedisLockService> owned_;  // empty when made from a reference
  RedisLockService& service_;
  const std::string key_;
  const LockOptions options_;

  mutable std::mutex mutex_;
  std::unordered_map<std::thread::id, std::vector<LockGuard>> holds_;  // guarded by mutex_; oldest first
};

}  // namespace dlock
