#pragma once
// The implementation behind RedisLockService, shared with the guards so that
// a guard can release its hold (and its lock stays renewed) even after the
// RedisLockService object is gone.

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include <spdlog/logger.h>

#include "dlock/detail/held_lock.hpp"
#include "dlock/detail/lock_names.hpp"
#include "dlock/detail/stats_recorder.hpp"
#include "dlock/detail/waiter_table.hpp"
#include "dlock/detail/watchdog.hpp"
#include "dlock/lock_guard.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/redis_executor.hpp"
#include "dlock/scripts.hpp"

namespace dlock::detail {

class ServiceCore : public std::enable_shared_from_this<ServiceCore> {
 public:
  ServiceCore(std::shared_ptr<RedisExecutor> redis, LockConfig config, std::shared_ptr<spdlog::logger> logger);

  // An empty guard when `throw_on_timeout` is false and the wait ran out.
  LockGuard acquire(std::string_view key, const LockOptions& options, bool throw_on_timeout);
  enum class Release { in_redis, locally_only };
  // locally_only forgets the hold (and stops renewing) but leaves Redis to expire it.
  void release(Hold& hold, Release how = Release::in_redis);
  void release_current_thread(std::string_view key);
  int hold_count(std::string_view key) const;
  void set_on_lost(std::function<void(const std::string&)> hook);
  std::size_t watched_locks() const { return watchdog_.watched_count(); }
  LockStats stats() const { return stats_.snapshot(); }
  spdlog::logger& logger() { return *logger_; }

 private:
  LockNames names_for(std::string_view key) const;
  std::string owner_token() const;
  // The key of held_ for one owner's holds of one user key.
  static std::string held_key(std::string_view owner, std::string_view key);
  void leave_line(const LockNames& names, const std::string& owner);
  // This process' holds under `held` (a held_key(); 0 if none or lost), as the acquire script wants them.
  int known_holds(const std::string& held) const;
  void validate(std::string_view key, const LockOptions& options) const;
  LockGuard grant(std::string_view key, const LockNames& names, const std::string& owner, const std::string& held,
                  long long holds, std::uint64_t fencing_token, Millis lease, bool renewed, Clock::time_point sent,
                  Clock::time_point called, int handoffs_in_a_row = 0);
  // The lock, handed to this waiter inside a release by another thread of this process.
  LockGuard grant_direct(std::string_view key, const LockNames& names, const std::string& owner,
                         const std::string& held, const WaiterTable::DirectGrant& direct, Millis lease, bool renewed,
                         Clock::time_point called);
  void handle_lost(const std::shared_ptr<HeldLock>& lock, const std::string& why);
  [[noreturn]] void throw_reply_error(std::string_view key, const LockNames& names, const RedisReply& reply,
                                      std::string_view during) const;

  const std::shared_ptr<RedisExecutor> redis_;
  const LockConfig config_;
  const std::shared_ptr<spdlog::logger> logger_;
  const std::string instance_id_;  // 128 CSPRNG bits, hex
  ScriptRunner scripts_;
  WaiterTable waiters_;
  StatsRecorder stats_;

  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<HeldLock>> held_;  // guarded by mutex_; keyed by held_key()
  std::function<void(const std::string&)> on_lost_;                  // guarded by mutex_

  Watchdog watchdog_;  // last: its thread stops before the members it uses go
};

}  // namespace dlock::detail
