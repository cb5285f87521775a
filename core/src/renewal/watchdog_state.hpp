#pragma once
// The watchdog's state, shared by the service and the watchdog's threads
// (watchdog.cpp): the locks watched and when each falls due, the batches
// handed to the renewer, the keep-alive beat, the masters' resets
// (master_resets.cpp); and the timing rules they follow.

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "dlock/detail/watchdog.hpp"
#include "renewal/renewal_schedule.hpp"

namespace dlock::detail {

// Renewals due within this much of each other share one pipeline.
inline constexpr Millis kBatchWindow{20};
// Locks renewed by one script call (a pipeline holds as many calls as its batch needs).
inline constexpr std::size_t kLocksPerCall = 100;
// The watchdog gives its verdict this long before a lock's validity ends (a
// renewal that has not succeeded by then cannot save it), so that the stop
// token and the hook, which need this thread and the hook's to be scheduled,
// still come before Redis can expire the lock on a loaded machine. At most a
// tenth of the lease: a short lease must not be lost at its grant.
inline constexpr Millis kVerdictLead{25};
// A renewal's I/O gives up this long before the first verdict it could
// delay (socket timeouts fire late by a timer tick or more); at most a
// twentieth of the lease, so a short lease's renewal still has time to run.
inline constexpr Millis kIoMargin{10};

inline Clock::time_point verdict_time(const HeldLock& lock) {
  return lock.valid_until_time() - std::min(kVerdictLead, Millis(lock.lease_ms.load()) / 10);
}

inline Millis io_margin(const HeldLock& lock) { return std::min(kIoMargin, Millis(lock.lease_ms.load()) / 20); }

inline Millis renewal_period(const HeldLock& lock) { return Millis(lock.lease_ms.load()) / 3; }

// After a failed renewal, try again soon but keep inside the validity.
inline Millis retry_delay(const HeldLock& lock) {
  return std::clamp(Millis(lock.lease_ms.load()) / 10, Millis(10), Millis(1000));
}

using LostList = std::vector<std::pair<std::shared_ptr<HeldLock>, std::string>>;

// Shared by the service and the thread, so the thread can outlive a Watchdog
// destroyed from inside its own lost handler.
struct Watchdog::State {
  RedisExecutor* redis;   // valid until stopping (the owner joins before it goes)
  ScriptRunner* scripts;  // likewise
  StatsRecorder* stats;   // likewise
  std::shared_ptr<spdlog::logger> logger;
  LostHandler on_lost;  // set before the thread starts, then only read

  using Plan = RenewalSchedule::Plan;
  // A watched lock, and its place in the schedule.
  struct Watched : RenewalSchedule::Task {
    explicit Watched(std::shared_ptr<HeldLock> held) : lock(std::move(held)) {}
    std::shared_ptr<HeldLock> lock;
    bool in_flight = false;  // with the renewer now
  };

  mutable std::mutex mutex;
  std::condition_variable wake;  // with mutex
  // Hashed (a map keyed by lock costs a tree search, a cache miss per level,
  // at every lookup); its nodes never move, so the schedule points into them.
  std::unordered_map<const HeldLock*, Watched> watched;  // guarded by mutex
  RenewalSchedule schedule;                              // guarded by mutex: every entry of watched, planned
  std::deque<std::vector<std::shared_ptr<HeldLock>>> batches;   // guarded by mutex: for the renewer
  std::condition_variable batch_ready;                          // with mutex
  bool stopping = false;                                                                      // guarded by mutex
  Clock::time_point sleeping_until = Clock::time_point::max();  // guarded by mutex: when the thread wakes by itself
  Clock::time_point latest_due = Clock::time_point::min();      // guarded by mutex: of every task ever planned
  std::function<void(Clock::time_point)> beat;                  // set before the threads start, then only read
  Millis beat_period{0};                                        // likewise
  Clock::time_point beat_due = Clock::time_point::max();        // guarded by mutex: max when there is no beat
  bool beat_pending = false;                                    // guarded by mutex: handed to the renewer
  Subscription resets;                    // guarded by mutex: the executor's reset notices, threads' start to stop()
  std::string reset;                      // guarded by mutex: a reset not yet acted on ("" none), for the log
  std::unordered_set<const HeldLock*> renew_again;  // guarded by mutex: in flight at a reset; due again once back

  // Hands the keep-alive beat to the renewer once it is due.
  void hand_beat_if_due(Clock::time_point now) {
    if (now < beat_due) return;
    beat_pending = true;
    beat_due = now + beat_period;
    batch_ready.notify_one();
  }

  // How long a beat's I/O may take: a tenth of its period, 10 ms to 1 s.
  Millis beat_io_limit() const { return std::clamp(beat_period / 10, Millis(10), Millis(1000)); }

  void plan_locked(const std::shared_ptr<HeldLock>& lock, Clock::time_point due, Plan kind) {
    auto [it, fresh] = watched.try_emplace(lock.get(), lock);
    try {
      replan_locked(it->second, due, kind);
    } catch (...) {
      if (fresh) watched.erase(it);  // an entry is never left without a task
      throw;
    }
  }

  // Moves a watched lock's task to `due`; `kind` says which plan it is (the
  // schedule keeps plans of one kind and lease in lanes, renewal_schedule.hpp).
  void replan_locked(Watched& entry, Clock::time_point due, Plan kind) {
    schedule.plan(entry, due, kind, entry.lock->lease_ms.load());
    latest_due = std::max(latest_due, due);
  }

  // Returns whether the lock was still watched.
  bool forget_locked(const HeldLock* lock) {
    auto it = watched.find(lock);
    if (it == watched.end()) return false;
    schedule.remove(it->second);
    watched.erase(it);
    renew_again.erase(lock);
    return true;
  }

  // Master resets (master_resets.cpp). Subscribes `state` to the executor's
  // notices; called under the mutex as the threads start.
  static void follow_resets(const std::shared_ptr<State>& state);
  // A notice, on the executor's thread: wakes the scheduler.
  void on_reset(const std::string& what);
  // The scheduler's part: every watchdog-managed lock falls due now (one on
  // the wire goes again once back). Logs without the mutex, which `guard`
  // holds on entry and exit.
  void renew_all_now(std::unique_lock<std::mutex>& guard);

  // Renews `batch` in one pipeline, giving up at `deadline`. Returns, per lock,
  // whether it was renewed (validity extended), found gone (appended to
  // `lost`) or not told (left to be tried again).
  std::vector<bool> renew(const std::vector<std::shared_ptr<HeldLock>>& batch, Clock::time_point deadline,
                          LostList& lost);

  // Forgets the locks found lost (a lock released meanwhile is not lost,
  // whatever its renewal said) and tells the handler, without the mutex: it
  // calls back into the service. `guard` holds the mutex on entry and exit.
  void report(std::unique_lock<std::mutex>& guard, LostList& lost) {
    LostList to_report;
    for (auto& [lock, why] : lost) {
      if (forget_locked(lock.get()) && !why.empty()) to_report.emplace_back(lock, std::move(why));
    }
    if (to_report.empty()) return;
    guard.unlock();
    for (const auto& [lock, why] : to_report) {
      if (on_lost) on_lost(lock, why);
    }
    guard.lock();
  }
};

}  // namespace dlock::detail
