#include "dlock/detail/watchdog.hpp"

#include <algorithm>

#include "dlock/errors.hpp"

namespace dlock::detail {
namespace {

// Renewals due within this much of each other share one pipeline.
constexpr Millis kBatchWindow{20};

Millis renewal_period(const HeldLock& lock) { return Millis(lock.lease_ms.load()) / 3; }

// After a failed renewal, try again soon but keep inside the validity.
Millis retry_delay(const HeldLock& lock) { return std::clamp(Millis(lock.lease_ms.load()) / 10, Millis(10), Millis(1000)); }

}  // namespace

Watchdog::Watchdog(ScriptRunner& scripts, std::shared_ptr<spdlog::logger> logger, LostHandler on_lost)
    : scripts_(scripts), logger_(std::move(logger)), on_lost_(std::move(on_lost)) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    // A lost handler may drop the last reference to the service on this very thread.
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach();
    else
      thread_.join();
  }
}

void Watchdog::schedule_locked(const std::shared_ptr<HeldLock>& lock, Clock::time_point due) {
  auto it = watched_.find(lock.get());
  if (it != watched_.end()) {
    schedule_.erase({it->second.second, lock.get()});
    it->second.second = due;
  } else {
    watched_.emplace(lock.get(), std::make_pair(lock, due));
  }
  schedule_.insert({due, lock.get()});
}

void Watchdog::watch(const std::shared_ptr<HeldLock>& lock, Clock::time_point granted) {
  Clock::time_point due = lock->renewed.load() ? granted + renewal_period(*lock) : lock->valid_until_time();
  {
    std::lock_guard guard(mutex_);
    if (stopping_) return;
    schedule_locked(lock, due);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  wake_.notify_one();
}

void Watchdog::unwatch(const HeldLock& lock) {
  std::lock_guard guard(mutex_);
  auto it = watched_.find(&lock);
  if (it == watched_.end()) return;
  schedule_.erase({it->second.second, &lock});
  watched_.erase(it);
}

std::size_t Watchdog::watched_count() const {
  std::lock_guard guard(mutex_);
  return watched_.size();
}

void Watchdog::run() {
  std::unique_lock guard(mutex_);
  while (!stopping_) {
    if (schedule_.empty()) {
      wake_.wait(guard);
      continue;
    }
    Clock::time_point first = schedule_.begin()->first;
    if (Clock::now() < first) {
      wake_.wait_until(guard, first);
      continue;
    }
    // Take every task due now or within the batch window.
    Clock::time_point now = Clock::now();
    std::vector<std::shared_ptr<HeldLock>> due;
    while (!schedule_.empty() && schedule_.begin()->first <= now + kBatchWindow) {
      const HeldLock* lock = schedule_.begin()->second;
      schedule_.erase(schedule_.begin());
      auto it = watched_.find(lock);
      due.push_back(it->second.first);
      // Parked far ahead until this round re-plans it, so it is not taken twice.
      it->second.second = Clock::time_point::max();
      schedule_.insert({it->second.second, lock});
    }
    guard.unlock();

    std::vector<std::pair<std::shared_ptr<HeldLock>, std::string>> lost;
    std::vector<std::shared_ptr<HeldLock>> to_renew;
    for (auto& lock : due) {
      if (lock->lost_flag.load()) {
        lost.emplace_back(lock, "");
      } else if (now >= lock->valid_until_time()) {
        lost.emplace_back(lock, lock->renewed.load()
                                    ? "no renewal succeeded before its lease ran out by the local clock"
                                    : "its fixed lease ran out while it was still held");
      } else if (lock->renewed.load()) {
        to_renew.push_back(lock);
      }
    }
    if (!to_renew.empty()) renew(to_renew, lost);

    guard.lock();
    for (auto& [lock, why] : lost) {
      auto it = watched_.find(lock.get());
      if (it == watched_.end()) continue;  // released meanwhile: not lost
      schedule_.erase({it->second.second, lock.get()});
      watched_.erase(it);
    }
    // Re-plan what is still watched; a lock unwatched during the round stays out.
    for (auto& lock : due) {
      auto it = watched_.find(lock.get());
      if (it == watched_.end() || it->second.second != Clock::time_point::max()) continue;
      Clock::time_point next;
      if (!lock->renewed.load()) {
        next = lock->valid_until_time();
      } else {
        next = std::min(lock->valid_until_time(), Clock::now() + renewal_period(*lock));
      }
      schedule_.erase({it->second.second, lock.get()});
      it->second.second = next;
      schedule_.insert({next, lock.get()});
    }
    // Notify outside the mutex: handlers may call back into the service.
    std::vector<std::pair<std::shared_ptr<HeldLock>, std::string>> to_report;
    for (auto& entry : lost) {
      if (!entry.second.empty()) to_report.push_back(std::move(entry));
    }
    if (!to_report.empty()) {
      guard.unlock();
      for (auto& [lock, why] : to_report) on_lost_(lock, why);
      guard.lock();
    }
  }
}

void Watchdog::renew(std::vector<std::shared_ptr<HeldLock>>& batch,
                     std::vector<std::pair<std::shared_ptr<HeldLock>, std::string>>& lost) {
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> calls;
  calls.reserve(batch.size());
  for (auto& lock : batch) {
    calls.push_back({{lock->lock_name}, {lock->owner, std::to_string(lock->lease_ms.load())}});
  }
  Clock::time_point sent = Clock::now();
  std::vector<RedisReply> replies;
  try {
    replies = scripts_.run_pipelined(kRenewScript, calls);
  } catch (const Error& e) {
    logger_->warn("watchdog: renewing {} lock(s) failed, will retry until their leases run out: {}", batch.size(),
                  e.what());
    // Retry sooner than the usual period, still inside the validity; the
    // caller's re-plan leaves these alone.
    std::lock_guard guard(mutex_);
    for (auto& lock : batch) {
      auto it = watched_.find(lock.get());
      if (it == watched_.end()) continue;
      Clock::time_point next = std::min(lock->valid_until_time(), Clock::now() + retry_delay(*lock));
      schedule_.erase({it->second.second, lock.get()});
      it->second.second = next;
      schedule_.insert({next, lock.get()});
    }
    return;
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const RedisReply* reply = i < replies.size() ? &replies[i] : nullptr;
    if (reply && reply->type == RedisReply::Type::Integer && reply->integer == 1) {
      batch[i]->extend_validity(sent, Millis(batch[i]->lease_ms.load()));
    } else if (reply && reply->type == RedisReply::Type::Integer && reply->integer == 0) {
      lost.emplace_back(batch[i], "its key is gone from Redis or belongs to another owner (expired, deleted or overwritten)");
    } else {
      logger_->warn("watchdog: unexpected reply renewing lock '{}': {}", batch[i]->key,
                    reply ? reply->str : std::string("none"));
    }
  }
}

}  // namespace dlock::detail

