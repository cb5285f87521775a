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
// asynchronous), or evicts it (any maxmemory-policy but noeviction), forgets
// locks: another owner may then take a key while its old holder still runs.
// A holder paused (GC, swap, SIGSTOP) past its lease may not learn in time
// that its lock expired. Both are why every guard has a fencing token: a
// resource that refuses tokens lower than the last it saw is safe even then.
// dlock also marks a holder lost by its local clock, with a drift margin,
// before the lease can have run out in Redis.
//
// Fencing tokens. Every grant that is not a re-entry draws a new token from
// the lock's counter in Redis; re-entrant holds share their acquisition's.
// A counter is seeded from the Redis server's clock in microseconds when it
// is new or has expired (lock.fence_retention_ms after its seeding), so on
// one Redis tokens strictly increase, across restarts too, as long as (a) the
// server's clock never goes back (no step backwards, no restart on a host
// whose clock is behind) and (b) a key is granted less than once per µs on
// average. They can repeat or go back when a failover promotes a replica that
// had not received the latest INCRs (asynchronous replication), when a
// restarted Redis loads an older snapshot while its clock was set back, or
// when a clock steps backwards.
//
// Ownership: re-entry is decided per owner (owner.hpp): by default the
// calling thread (a thread-local owner), or the Owner given in
// LockOptions::owner, which is what coroutine and task-based code must use
// (coroutines share threads). A hold, once granted, belongs to its guard,
// which may release it from any thread.
//
// What it leaves in Redis, for a key K and prefix P (lock.key_prefix):
//   P{K}          hash: owner token → hold count, with the lease as its PTTL
//   P{K}:fence    the fencing counter, INCRed on each first acquisition; expires
//                 lock.fence_retention_ms after its seeding (default 7 days)
//   P{K}:released channel: a message when a lock becomes free with someone in
//                 line, naming the waiter whose turn it is
//   P{K}:queue    sorted set: waiting acquisitions by arrival, while anyone waits
//   P{K}:alive    sorted set: until when each waiter is presumed alive
//   P{K}:turn     for a third of a turn window, the waiter last told it is its turn
// and, once per service, not per lock, Pinstance:<instance>: the service's
// host, pid and start time, for operators (detail/instance_registry.hpp).
// The hash's fields are acquisition ids, "<instance>:<owner>:<n>": every
// first acquisition has its own, so a retried call, a detached lock and a
// late renewal are each told apart from a new acquisition by the same thread
// (<n> is the microseconds since the service started, see acquisition_id.hpp).
//
// Fairness: waiters are served in arrival order across threads, processes
// and hosts, however the lock became free (released, lease ran out, holder
// crashed). A zero wait (try once) never queues, and never takes a free lock
// while a live waiter is in line. A waiter that died costs the others at most
// one turn window (lock.turn_window_ms).

#include <chrono>
#include <concepts>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/logger.h>

#include "dlock/detail/async_acquire.hpp"
#include "dlock/errors.hpp"
#include "dlock/lock_guard.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/lock_status.hpp"
#include "dlock/lock_stats.hpp"
#include "dlock/multi_lock_guard.hpp"
#include "dlock/semaphore.hpp"
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
  // lock.wait_ms: 10 s unless configured) runs out, in line behind earlier waiters, sleeping on the
  // lock's release notice between tries; an outage of Redis shorter than the
  // wait is waited out. A zero wait tries once. Throws LockTimeoutError when
  // not had in time ("busy; tried once" for a zero wait), InvalidArgument for an empty or too long key, a negative wait or a
  // lease ≤ 0, ConnectionError when Redis cannot be reached, RedisError when
  // a key of another type sits at the lock's name. Leaves in Redis: the lock
  // hash with one more hold for this thread's token.
  LockGuard lock(std::string_view key, LockOptions options = {});

  // As lock(), but returns an empty (false) guard instead of throwing
  // LockTimeoutError, and without options.wait it tries exactly once (as
  // std::mutex::try_lock and Redisson's tryLock() do): lock.wait_ms applies
  // to lock() only. Trying once never joins the line of waiters, and never
  // takes a free lock while a live waiter is in line.
  LockGuard try_lock(std::string_view key, LockOptions options = {});

  // Takes every key of a set (any range of strings, or a braced list) and
  // returns one guard holding them all (Redisson's RedissonMultiLock), or
  // throws LockTimeoutError holding none of them: the wait (options.wait, else
  // lock.wait_ms) is for the whole set, and a key not had in it releases the
  // keys already taken. The keys are taken one by one in one order for every
  // caller (sorted bytewise, whatever order they were given in), each as
  // lock() takes it (in its fair line, re-entrant with this thread's holds,
  // renewed, with its own fencing token), so callers locking overlapping sets
  // never deadlock: a caller waiting for a key holds only keys that sort
  // before it, and whoever holds that key never waits for those. Keys may
  // live on different Redis Cluster nodes and in any mode. Throws
  // InvalidArgument, before touching Redis, for an empty set, a key given
  // twice, or any key or option lock() would refuse.
  template <std::ranges::input_range Keys>
    requires std::convertible_to<std::ranges::range_reference_t<Keys>, std::string_view>
  MultiLockGuard lock_all(const Keys& keys, LockOptions options = {}) {
    return acquire_all(key_set(keys), options, true);
  }
  MultiLockGuard lock_all(std::initializer_list<std::string_view> keys, LockOptions options = {}) {
    return acquire_all(key_set(keys), options, true);
  }

  // As lock_all(), but returns an empty (false) guard instead of throwing
  // LockTimeoutError; without options.wait each key is tried once, as try_lock() does.
  template <std::ranges::input_range Keys>
    requires std::convertible_to<std::ranges::range_reference_t<Keys>, std::string_view>
  MultiLockGuard try_lock_all(const Keys& keys, LockOptions options = {}) {
    return acquire_all(key_set(keys), options, false);
  }
  MultiLockGuard try_lock_all(std::initializer_list<std::string_view> keys, LockOptions options = {}) {
    return acquire_all(key_set(keys), options, false);
  }

  // Read-write lock (Redisson's RReadWriteLock) at `key`, apart from the
  // plain lock of the same key: many readers at once, or one writer. Fair in
  // arrival order: a reader never passes a writer that waits ahead of it, so
  // a stream of readers never starves a writer, and readers that arrived
  // together go together. Re-entrant per thread in each mode; the thread
  // holding the write lock may take read locks inside it (and keep them past
  // its release: a downgrade); a read lock is never upgraded: write_lock()
  // by a thread holding only the read lock throws InvalidArgument (two such
  // threads would wait for each other forever). A writer's guard has a
  // fencing token from the key's own counter; a reader's is 0. Watchdog,
  // fixed leases, loss, detach() and the errors are as for lock(). Not over
  // a Redlock (InvalidArgument there).
  LockGuard read_lock(std::string_view key, LockOptions options = {});
  LockGuard write_lock(std::string_view key, LockOptions options = {});
  // As read_lock()/write_lock(), returning an empty guard instead of
  // throwing LockTimeoutError; without a wait, they try once.
  LockGuard try_read_lock(std::string_view key, LockOptions options = {});
  LockGuard try_write_lock(std::string_view key, LockOptions options = {});

  // A handle on the semaphore `name` (semaphore.hpp). With `permits`, the
  // count it is created with if Redis has none yet; without, it must have
  // one. Throws InvalidArgument for a bad name or permits < 1. No round trip.
  Semaphore semaphore(std::string_view name, long long permits);
  Semaphore semaphore(std::string_view name);

  // Java/Redisson style: releases the most recent hold of `key` taken by the
  // CURRENT thread; that hold's guard becomes empty. Throws NotOwnerError,
  // with Redis untouched, if this thread holds none; LockLostError as
  // LockGuard::unlock().
  void unlock(std::string_view key);
  // The same for the holds of `owner` (owner.hpp), from any thread.
  void unlock(std::string_view key, Owner owner);

  // Whether this thread holds `key` (and has not lost it). Local: no round trip.
  bool held_by_current_thread(std::string_view key) const;
  // Whether `owner` holds `key` (and has not lost it). Local.
  bool held_by(std::string_view key, Owner owner) const;

  // This thread's re-entry depth on `key`: 0 when not held. Local.
  int hold_count(std::string_view key) const;
  // `owner`'s re-entry depth on `key`: 0 when not held. Local.
  int hold_count(std::string_view key, Owner owner) const;

  // What Redis holds now, for any owner in any process (lock_status.hpp), as
  // `dlock status` shows it; Redisson's isLocked(), remainTimeToLive() and
  // getHoldCount(). Reads only: the lock in one atomic step (a script: SCRIPT
  // LOAD, EVALSHA running HGETALL, PTTL, GET, ZCARD), then one GET per holder's
  // service entry. Over a Redlock the answer is what a majority of the nodes
  // agree on (its owners; the smallest lease, the largest fencing token and
  // line among them), and ConnectionError when no majority agrees now (the
  // lock is being taken or given back, or too many nodes are down): try again.
  // Throws InvalidArgument for a key lock() would refuse, RedisError when
  // Redis refuses the read (a name holding another type, a missing ACL
  // right), ConnectionError when Redis cannot be reached. Blocks for one or
  // two round trips; leaves nothing in Redis.
  LockStatus status(std::string_view key) const;
  // Whether anyone holds `key` now: status(key).held().
  bool locked(std::string_view key) const;
  // The lease `key`'s lock has left: none when free or without expiry.
  std::optional<std::chrono::milliseconds> lease_left(std::string_view key) const;

  // The operator's escape hatch, `dlock unlock --force`: deletes `key`'s lock
  // whoever holds it and hands its turn to the oldest live waiter in line,
  // woken at once. The holder is not told at once: its watchdog finds the
  // lock gone at its next renewal and reports it lost (on_lost(), its
  // guard's lost()); a fixed lease's holder learns it at its release. Over a
  // Redlock it runs on every node that answers (see ForcedUnlock). Throws
  // InvalidArgument for a bad key, RedisError when Redis refuses (on a
  // Redlock, a refusal a majority gave alike), ConnectionError when Redis
  // cannot be reached or, on a Redlock, a majority did not answer (it was
  // done on those that did: run it again). Logs each owner removed at warn.
  ForcedUnlock force_unlock(std::string_view key);

  // The same for the read-write lock at `key` and the semaphore `name`: its
  // writer and readers, or its permits held and by whom (one script reads
  // both). Throws as status() does, and InvalidArgument over a Redlock,
  // which offers neither.
  ReadWriteLockStatus read_write_status(std::string_view key) const;
  SemaphoreStatus semaphore_status(std::string_view name) const;
  // `dlock unlock --force --read-write` and `--semaphore`: removes the
  // holders of the read-write lock at `key` (its writer and every reader) or
  // the permits held of the semaphore `name` (its count stays), or only
  // `owner`'s (an acquisition id, as status shows it) when given, and wakes
  // their line as a release does. Returns what was removed (empty: nothing
  // held). The holders learn it at their watchdog's next renewal. Throws as
  // force_unlock() does, and InvalidArgument over a Redlock.
  std::vector<RemovedHolder> force_unlock_read_write(std::string_view key, std::string_view owner = {});
  std::vector<RemovedHolder> force_release_permits(std::string_view name, std::string_view owner = {});

  // Called with the user key when a held lock is lost, on a thread of its own
  // (started when a hook is set): hooks run one at a time in the order the
  // losses were found; a slow hook delays later hooks, never renewals nor
  // other locks' lost() and stop tokens. The hook may drop guards and the
  // service itself.
  void on_lost(std::function<void(const std::string& key)> hook);

  // Number of locks the watchdog currently watches (one per key and owner).
  std::size_t watched_locks() const;

  // Counters since the service started, and gauges of the keys held and the
  // calls waiting now (by key prefix with lock.metrics); no round trip,
  // thread-safe.
  LockStats stats() const;

  // The async API's entry, which <dlock/asio.hpp> wraps in Asio's completion
  // tokens (detail/async_acquire.hpp): starts an acquisition and returns at
  // once; `done` is called once, on one of dlock's I/O threads.
  std::shared_ptr<detail::AsyncOperation> start_async(detail::AsyncRequest request, detail::AsyncDone done);
  // The same for lock_all() and try_lock_all() (async_lock_all).
  std::shared_ptr<detail::AsyncOperation> start_async_all(std::vector<std::string> keys, LockOptions options,
                                                          bool throw_on_timeout, detail::AsyncSetDone done);

 private:
  template <typename Keys>
  static std::vector<std::string> key_set(const Keys& keys) {
    std::vector<std::string> set;
    for (auto&& key : keys) set.emplace_back(std::string_view(key));
    return set;
  }
  MultiLockGuard acquire_all(std::vector<std::string> keys, LockOptions options, bool throw_on_timeout);

  std::shared_ptr<detail::ServiceCore> core_;
};

}  // namespace dlock
