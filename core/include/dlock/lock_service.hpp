#pragma once
// RedisLockService: reentrant distributed locks on Redis.
//
// What a lock promises. While lock() has returned a guard and that guard is
// true, no other owner holds the same key through the same Redis: not another
// thread, process or host. The same thread may take a key again (re-entry);
// the lock is freed only by the release of the outermost hold. A holder that
// dies stops renewing, and its lock expires after its lease.
//
// What it does not promise. A Redis that restarts without persistence, or
// fails over to a replica that had not yet seen the lock (replication is
// asynchronous), forgets locks: another owner may then take a key while its
// old holder still runs. A holder paused (GC, swap, SIGSTOP) past its lease
// may not learn in time that its lock expired. Both are why every guard has a
// fencing token: a resource that refuses tokens lower than the last it saw
// is safe even then. dlock also marks a holder lost by its local clock, with
// a drift margin, before the lease can have run out in Redis.
//
// Ownership: re-entry is decided per thread (a thread-local owner token);
// a hold, once granted, belongs to its guard, which may release it from any
// thread.
//
// What it leaves in Redis, for a key K and prefix P (lock.key_prefix):
//   P{K}          hash: owner token → hold count, with the lease as its PTTL
//   P{K}:fence    the fencing counter, INCRed on each first acquisition; kept
//   P{K}:released channel: a message on each final release, naming the next owner
//   P{K}:queue    sorted set: waiting owner tokens by arrival, while anyone waits
//   P{K}:turn     for a short window after a final release, the waiter whose turn it is
//
// Fairness: waiters are served in arrival order across threads, processes
// and hosts; a zero wait (try once) never queues and fails during another
// waiter's turn.

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/logger.h>

#include "dlock/errors.hpp"
#include "dlock/lock_guard.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/lock_stats.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock {

namespace detail {
class ServiceCore;
}

class RedisLockService {
 public:
  // Loads the lock scripts into Redis at once: throws ConnectionError if Redis
  // cannot be reached, InvalidArgument for an unusable config (empty prefix,
  // watchdog timeout ≤ 0). With no logger, uses the spdlog logger named
  // "dlock" if registered, else spdlog's default logger.
  RedisLockService(std::shared_ptr<RedisExecutor> redis, LockConfig config,
                   std::shared_ptr<spdlog::logger> logger = nullptr);
  // Guards may outlive the service: they keep what they need to release, and
  // their locks stay renewed until released.
  ~RedisLockService();
  RedisLockService(const RedisLockService&) = delete;
  RedisLockService& operator=(const RedisLockService&) = delete;

  // Blocks until the lock is had or the wait (options.wait, else
  // lock.wait_ms) runs out, in line behind earlier waiters, sleeping on the
  // lock's release notice between tries; an outage of Redis shorter than the
  // wait is waited out. A zero wait tries once. Throws LockTimeoutError when not had in
  // time, InvalidArgument for an empty or too long key, a negative wait or a
  // lease ≤ 0, ConnectionError when Redis cannot be reached, RedisError when
  // a key of another type sits at the lock's name. Leaves in Redis: the lock
  // hash with one more hold for this thread's token.
  LockGuard lock(std::string_view key, LockOptions options = {});

  // As lock(), but returns an empty (false) guard instead of throwing
  // LockTimeoutError.
  LockGuard try_lock(std::string_view key, LockOptions options = {});

  // Java/Redisson style: releases the most recent hold of `key` taken by the
  // CURRENT thread; that hold's guard becomes empty. Throws NotOwnerError,
  // with Redis untouched, if this thread holds none; LockLostError as
  // LockGuard::unlock().
  void unlock(std::string_view key);

  // Whether this thread holds `key` (and has not lost it). Local: no round trip.
  bool held_by_current_thread(std::string_view key) const;

  // This thread's re-entry depth on `key`: 0 when not held. Local.
  int hold_count(std::string_view key) const;

  // Called (on the watchdog's thread, with the user key) when a held lock is
  // lost. Keep it short; it must not block on a lock of this service.
  void on_lost(std::function<void(const std::string& key)> hook);

  // Number of locks the watchdog currently watches (one per key and owner).
  std::size_t watched_locks() const;

  // Counters since the service started; cheap (no round trip), thread-safe.
  LockStats stats() const;

 private:
  std::shared_ptr<detail::ServiceCore> core_;
};

}  // namespace dlock
