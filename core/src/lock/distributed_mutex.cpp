// DistributedMutex: each thread's holds kept as a stack of LockGuards, so that lock(),
// try_lock() and unlock() behave as a standard Lockable's, re-entrant per thread.
#include "dlock/distributed_mutex.hpp"

#include <algorithm>
#include <utility>

#include "dlock/errors.hpp"

namespace dlock {
namespace {

RedisLockService& checked(const std::shared_ptr<RedisLockService>& service) {
  if (!service) throw InvalidArgument("DistributedMutex needs a RedisLockService; got a null pointer");
  return *service;
}

}  // namespace

DistributedMutex::DistributedMutex(std::shared_ptr<RedisLockService> service, std::string key, LockOptions options)
    : owned_(std::move(service)), service_(checked(owned_)), key_(std::move(key)), options_(options) {
  if (key_.empty()) throw InvalidArgument("DistributedMutex: the lock key is empty; pass a key such as \"stock:42\"");
}

DistributedMutex::DistributedMutex(RedisLockService& service, std::string key, LockOptions options)
    : service_(service), key_(std::move(key)), options_(options) {
  if (key_.empty()) throw InvalidArgument("DistributedMutex: the lock key is empty; pass a key such as \"stock:42\"");
}

DistributedMutex::~DistributedMutex() {
  std::unordered_map<std::thread::id, std::vector<LockGuard>> left;
  {
    std::lock_guard guard(mutex_);
    left.swap(holds_);
  }
  // Innermost first, as the threads would have unlocked them.
  for (auto& [thread, guards] : left) {
    while (!guards.empty()) guards.pop_back();
  }
}

void DistributedMutex::push(LockGuard guard) {
  std::lock_guard lock(mutex_);
  holds_[std::this_thread::get_id()].push_back(std::move(guard));
}

void DistributedMutex::lock() { push(service_.lock(key_, options_)); }

bool DistributedMutex::try_lock() { return try_lock_waiting(Millis(0)); }

bool DistributedMutex::try_lock_waiting(Millis wait) {
  LockOptions options = options_;
  options.wait = std::max(wait, Millis(0));
  LockGuard guard = service_.try_lock(key_, options);
  if (!guard) return false;
  push(std::move(guard));
  return true;
}

void DistributedMutex::unlock() noexcept {
  LockGuard latest;
  {
    std::lock_guard lock(mutex_);
    auto it = holds_.find(std::this_thread::get_id());
    if (it == holds_.end()) return;
    latest = std::move(it->second.back());
    it->second.pop_back();
    if (it->second.empty()) holds_.erase(it);
  }
  // Released here, outside the mutex, by the guard's destructor: it logs what fails and never throws.
}

int DistributedMutex::hold_count() const {
  std::lock_guard lock(mutex_);
  auto it = holds_.find(std::this_thread::get_id());
  return it == holds_.end() ? 0 : static_cast<int>(it->second.size());
}

std::uint64_t DistributedMutex::fencing_token() const {
  std::lock_guard lock(mutex_);
  auto it = holds_.find(std::this_thread::get_id());
  return it == holds_.end() ? 0 : it->second.back().fencing_token();
}

void DistributedMutex::check() const {
  std::lock_guard lock(mutex_);
  auto it = holds_.find(std::this_thread::get_id());
  if (it != holds_.end()) it->second.back().check();
}

}  // namespace dlock
