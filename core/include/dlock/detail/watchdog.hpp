#pragma once
// The watchdog: one scheduler thread per service serving every held lock.
// Each watched lock has one task: a watchdog-managed lock is renewed every
// lease/3 (renewals falling due together go out as one pipeline); a fixed
// lease is only checked when it runs out. A lock whose renewal finds it gone,
// or whose validity ran out by the local clock before a renewal succeeded, is
// handed to the lost handler and no longer watched.

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/logger.h>

#include "dlock/detail/held_lock.hpp"
#include "dlock/scripts.hpp"

namespace dlock::detail {

class Watchdog {
 public:
  using LostHandler = std::function<void(const std::shared_ptr<HeldLock>&, const std::string& why)>;

  Watchdog(ScriptRunner& scripts, std::shared_ptr<spdlog::logger> logger, LostHandler on_lost);
  ~Watchdog();  // stops and joins the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts watching (or re-plans) a lock: the next renewal is due lease/3
  // after `granted` (when its lease was last granted), or, for a fixed lease,
  // the check when its validity runs out. Starts the thread on first use.
  void watch(const std::shared_ptr<HeldLock>& lock, Clock::time_point granted);

  // Stops watching. Called before the final release is sent, so no renewal
  // can re-extend a lock after its release; a renewal already in flight is
  // ignored when it returns.
  void unwatch(const HeldLock& lock);

  std::size_t watched_count() const;

 private:
  using Due = std::pair<Clock::time_point, const HeldLock*>;

  void run();
  void schedule_locked(const std::shared_ptr<HeldLock>& lock, Clock::time_point due);
  // Sends one pipeline of renewals; returns the locks found gone.
  void renew(std::vector<std::shared_ptr<HeldLock>>& batch, std::vector<std::pair<std::shared_ptr<HeldLock>, std::string>>& lost);

  ScriptRunner& scripts_;
  std::shared_ptr<spdlog::logger> logger_;
  LostHandler on_lost_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;                                           // guarded by mutex_
  std::map<const HeldLock*, std::pair<std::shared_ptr<HeldLock>, Clock::time_point>> watched_;  // guarded by mutex_
  std::set<Due> schedule_;                                                  // guarded by mutex_
  bool stopping_ = false;                                                   // guarded by mutex_
  std::thread thread_;                                                      // started under mutex_
};

}  // namespace dlock::detail
