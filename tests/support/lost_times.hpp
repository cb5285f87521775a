#pragma once
// When each lock's holder was told it lost the lock (the on_lost hook), for
// tests that measure how soon a holder learns of a restart or failover.

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "dlock/dlock.hpp"
#include "services.hpp"

namespace dlock::test {

class LostTimes {
 public:
  using Clock = std::chrono::steady_clock;

  // Records the first on_lost call of each key of `service`; this object must outlive the service's hooks.
  void hook(RedisLockService& service) {
    service.on_lost([this](const std::string& key) {
      std::lock_guard lock(mutex_);
      at_.try_emplace(key, Clock::now());
    });
  }

  // Milliseconds from `since` to the hook's call for `key` (negative if it came
  // before), waiting for it up to `limit`; none if it never came.
  std::optional<long long> ms_after(const std::string& key, Clock::time_point since,
                                    std::chrono::milliseconds limit = std::chrono::seconds(15)) {
    if (!eventually([&] { return told(key); }, limit)) return std::nullopt;
    std::lock_guard lock(mutex_);
    return std::chrono::duration_cast<std::chrono::milliseconds>(at_.at(key) - since).count();
  }

  bool told(const std::string& key) {
    std::lock_guard lock(mutex_);
    return at_.contains(key);
  }

 private:
  std::mutex mutex_;
  std::map<std::string, Clock::time_point> at_;  // guarded by mutex_
};

}  // namespace dlock::test
