#pragma once
// The settings of the lock itself (config section `lock:`) and per-call options.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "dlock/owner.hpp"

namespace dlock {

using Millis = std::chrono::milliseconds;

// Config section `lock:`; the defaults are the documented ones.
// How stats() breaks its gauges (locks held, waiters) down by key prefix:
// prometheus_text's `key_prefix` label. Off unless a list or a separator is
// set. The series are bounded, so a key space of millions cannot blow up a
// scrape: at most max_key_prefixes of them, plus "other" for every key that
// matches no rule or came after the bound was reached.
struct MetricsConfig {
  // Prefixes to break out, each a series of its own; a key counts under the
  // longest one it starts with.
  std::vector<std::string> key_prefixes;
  // For keys no listed prefix matches: the key up to and including its first
  // separator ("order:" of "order:42"), each new one a series of its own
  // while there is room. Empty: no such rule.
  std::string key_prefix_separator;
  // The bound on series besides "other", listed prefixes included; the
  // separator's prefixes take the room left, first seen first served.
  std::size_t max_key_prefixes = 20;
  bool breaks_down_by_key_prefix() const { return !key_prefixes.empty() || !key_prefix_separator.empty(); }
};

struct LockConfig {
  std::string key_prefix = "dlock:";
  Millis watchdog_timeout{30000};  // lease of a watchdog-managed lock
  // Default wait of lock(), the block forms, DistributedMutex::lock(), the
  // read/write locks, lock_all and Semaphore::acquire (try_lock() without a
  // wait tries once). Finite, as lock4j's 3 s and unlike Redisson's forever:
  // ordinary contention (a line of threads each holding for milliseconds)
  // is waited out many times over, while a holder stuck for longer becomes
  // a LockTimeoutError naming it instead of a thread hung without a word.
  Millis wait{10000};
  std::size_t max_key_bytes = 1024;
  // A waiter in line not heard from for this long is presumed dead and loses
  // its place; live waiters re-confirm every third of it. So a waiter that
  // died costs the others at most one window.
  Millis turn_window{1000};
  // How long a lock's fencing counter outlives its last seeding; then the
  // next acquisition seeds it again from the server's clock (see scripts).
  Millis fence_retention{7LL * 24 * 3600 * 1000};
  // After an acquisition and after each renewal, WAIT until this many
  // replicas acknowledged the write (0: do not wait). An acquisition fewer
  // replicas acknowledged within replica_ack_timeout is released and counts
  // as not had; a renewal as not done.
  int replica_acks = 0;
  Millis replica_ack_timeout{100};
  // The longest fixed lease a lock may be given (0: no limit). Over a
  // Redlock, a restarted node sits out one longest lease
  // (redis.redlock.restarted_node_delay_ms), so no lease may outlast that.
  Millis longest_lease{0};
  // dlock's threads that run the async API's round trips (<dlock/asio.hpp>),
  // besides its one timer thread. One by default: on a few cores a job
  // waiting for the busy thread costs less than waking a second one (async
  // bench A: 0.81 of the ceiling with one, 0.75 with two, on 2 cores); more
  // let round trips to a slow node (a Redlock's paused one) overlap.
  std::size_t async_io_threads = 1;
  MetricsConfig metrics;
};

struct BlockOptions;

struct LockOptions {
  // How long lock() may wait for a busy lock; unset → LockConfig::wait.
  // try_lock() without a wait tries once.
  std::optional<Millis> wait{};
  // A fixed lease that nobody renews; unset → the watchdog keeps the lock
  // for as long as it is held, with LockConfig::watchdog_timeout as lease.
  std::optional<Millis> lease{};
  // Who the hold belongs to for re-entry; unset → the calling thread
  // (Owner::current_thread()). Coroutine and other task-based code passes
  // the task's own (owner.hpp), or a guard's owner() to re-enter its lock.
  std::optional<Owner> owner{};

  // So that the block forms (macros.hpp) take a LockOptions value too.
  operator BlockOptions() const;
};

// The options of the block and scope forms (macros.hpp): LockOptions' two,
// and what the block does when its lock was lost while the body ran.
struct BlockOptions {
  std::optional<Millis> wait{};   // as LockOptions::wait
  std::optional<Millis> lease{};  // as LockOptions::lease
  // false: the block ends as usual and the loss is logged once, when found.
  // true: leaving the block normally (end, break, continue, return) releases
  // the lock with LockGuard::unlock(), so a lock lost while the body ran
  // ends the block in LockLostError, also when only the release finds out
  // (a forced unlock the watchdog has not yet seen); a failed release then
  // throws ConnectionError. Leaving by an exception never adds another.
  bool throw_if_lost = false;
  std::optional<Owner> owner{};  // as LockOptions::owner

  LockOptions lock_options() const { return {wait, lease, owner}; }
};

inline LockOptions::operator BlockOptions() const { return {wait, lease, false, owner}; }

}  // namespace dlock
