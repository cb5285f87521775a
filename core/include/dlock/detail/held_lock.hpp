#pragma once
// The local record of a lock this process holds in Redis: one HeldLock per
// (key, owner token), however deep the re-entry, and one Hold per granted
// hold (per guard). The watchdog renews HeldLocks; guards release Holds.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "dlock/detail/deadline_mutex.hpp"
#include "dlock/detail/key_label.hpp"
#include "dlock/lock_options.hpp"

namespace dlock::detail {

using Clock = std::chrono::steady_clock;

// Margin for the difference between our clock and Redis' (as Redlock's
// validity time): a lease of L is trusted for L − drift(L) after it was sent.
inline Millis clock_drift(Millis lease) { return lease / 100 + Millis(2); }

struct Hold;
struct Script;

// How a hold of a semaphore or a read-write lock (a record, see
// shared_scripts.hpp) is released; a lock has none: its release is the lock's.
struct OwnRelease {
  const Script* script = nullptr;  // record_release_script()
  std::vector<std::string> keys;   // record, queue[, set of holders]
  std::string channel;             // told when the record goes and someone waits
  std::string noun;                // "semaphore", "read lock", "write lock": for messages
};

struct HeldLock {
  HeldLock(std::string key_, std::string lock_name_, std::string owner_, std::string held_key_,
           std::uint64_t fencing_token_)
      : key(std::move(key_)), lock_name(std::move(lock_name_)), owner(std::move(owner_)),
        held_key(std::move(held_key_)), fencing_token(fencing_token_) {}

  const std::string key;        // as the user passed it
  const std::string lock_name;  // P{K}
  const std::string owner;      // the acquisition id, "<instance>:<thread>:<n>": its field in the lock's hash
  const std::string held_key;   // its key in the service's table of held locks
  const std::uint64_t fencing_token;

  std::atomic<bool> renewed{false};        // watchdog-managed (else a fixed lease)
  std::atomic<std::int64_t> lease_ms{0};   // what renewals and releases PEXPIRE to
  std::atomic<Clock::rep> valid_until{0};  // local-clock deadline of the last granted lease
  std::atomic<bool> lost_flag{false};      // set once, after the loss was reported; never cleared
  std::atomic<bool> loss_claimed{false};   // handle_lost's once-flag, set before its report
  std::atomic<bool> fence_raised{false};   // Redlock: fencing_token raised on a majority (set once, under io)
  int handoffs_in_a_row = 0;               // set before sharing: direct grants within this process that led here
  std::shared_ptr<const OwnRelease> own_release;  // set before sharing; null for a lock
  std::stop_source stop;                   // requested when lost

  // Held across each round trip that changes this acquisition's holds in
  // Redis (re-entry, release), so that Redis' count follows the local one
  // even when a guard moved to another thread releases while its thread
  // re-enters. Taken before ServiceCore::mutex_, never after it. Timed: a
  // re-entering thread waits for it only as long as its own wait (at least
  // kOtherThreadsRoundTrip).
  DeadlineMutex io;
  int holds = 0;                            // guarded by ServiceCore::mutex_
  bool detached = false;                    // guarded by ServiceCore::mutex_: a hold was detached; the lock stays
                                            // in Redis until its lease ends
  std::vector<std::weak_ptr<Hold>> stack;   // guarded by ServiceCore::mutex_: live holds, oldest first

  Clock::time_point valid_until_time() const { return Clock::time_point(Clock::duration(valid_until.load())); }

  // Records a lease granted by a command sent at `sent`; validity only grows.
  void extend_validity(Clock::time_point sent, Millis lease) {
    Clock::rep until = (sent + lease - clock_drift(lease)).time_since_epoch().count();
    Clock::rep seen = valid_until.load();
    while (seen < until && !valid_until.compare_exchange_weak(seen, until)) {
    }
  }

  // "lock 'K'", "semaphore 'K'", ...: how messages name it.
  std::string label() const { return labelled(own_release ? own_release->noun : "lock", key); }

  // Lost by flag (watchdog, release) or by the local clock (lease ran out).
  bool is_lost(Clock::time_point now = Clock::now()) const {
    return lost_flag.load() || now >= valid_until_time();
  }
};

struct Hold {
  explicit Hold(std::shared_ptr<HeldLock> lock_) : lock(std::move(lock_)) {}
  const std::shared_ptr<HeldLock> lock;
  std::atomic<bool> released{false};  // set once by whoever releases it first
};

}  // namespace dlock::detail
