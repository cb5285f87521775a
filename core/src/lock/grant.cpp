// A new acquisition: its id (adopting an orphan's, one whose outcome was
// unknown) and its grant, recorded as this thread's hold and watched.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "dlock/detail/service_core.hpp"

namespace dlock::detail {
namespace {

// Acquisitions whose outcome is unknown, remembered for the thread's next try.
constexpr std::size_t kMaxOrphans = 4096;

}  // namespace

std::string ServiceCore::acquisition_id(const std::string& held, const std::string& thread_owner) {
  {
    std::lock_guard guard(mutex_);
    auto it = orphans_.find(held);
    if (it != orphans_.end()) {
      std::string id = std::move(it->second.id);
      const bool live = Clock::now() < it->second.expires;
      orphans_.erase(it);
      if (live) return id;
    }
  }
  return format_acquisition_id(thread_owner, acquisitions_.next());
}

void ServiceCore::remember_orphan(const std::string& held, const std::string& id, Millis lease) {
  const Clock::time_point now = Clock::now();
  std::lock_guard guard(mutex_);
  if (orphans_.size() >= kMaxOrphans) {
    std::erase_if(orphans_, [now](const auto& entry) { return entry.second.expires <= now; });
  }
  if (orphans_.size() >= kMaxOrphans) return;  // the grant, if any, idles out its lease
  orphans_[held] = Orphan{id, now + lease};
}

LockGuard ServiceCore::grant_direct(std::string_view key, const LockNames& names, const std::string& id,
                                    const std::string& held, const WaiterTable::DirectGrant& direct, Millis lease,
                                    bool renewed, Clock::time_point called) {
  stats_.handed_over.fetch_add(1, std::memory_order_relaxed);
  return grant(key, names.lock(), id, held, direct.fencing_token, lease, renewed, direct.sent, called,
               direct.handoffs_in_a_row);
}

LockGuard ServiceCore::grant(std::string_view key, std::string_view lock_name, const std::string& id,
                             const std::string& held, std::uint64_t fencing_token, Millis lease, bool renewed,
                             Clock::time_point sent, Clock::time_point called, int handoffs_in_a_row,
                             std::shared_ptr<const OwnRelease> own_release) {
  auto lock = std::make_shared<HeldLock>(std::string(key), std::string(lock_name), id, held, fencing_token);
  lock->own_release = std::move(own_release);
  lock->renewed = renewed;
  lock->lease_ms = lease.count();
  lock->holds = 1;
  lock->handoffs_in_a_row = handoffs_in_a_row;
  lock->extend_validity(sent, lease);
  auto hold = std::make_shared<Hold>(lock);
  lock->stack.push_back(hold);
  std::shared_ptr<HeldLock> stale;
  {
    std::lock_guard guard(mutex_);
    if (auto it = held_.find(held); it != held_.end()) {
      // Redis granted a new acquisition while we still had a record: it had expired unnoticed.
      if (!it->second->lost_flag.load()) stale = it->second;
      // The entry's node is reused (nothing to allocate, nothing to fail);
      // its key, a view of the old record's held_key, now views the new one's.
      auto node = held_.extract(it);
      node.key() = lock->held_key;
      node.mapped() = lock;
      held_.insert(std::move(node));
    } else {
      held_.emplace(std::string_view(lock->held_key), lock);
    }
  }
  stats_.acquired.fetch_add(1, std::memory_order_relaxed);
  if (key_prefix_series_.enabled()) key_prefix_series_.series_of(key);  // first seen, first served
  if (stale) handle_lost(stale, "its lease ran out before this thread took the lock again");
  watchdog_.watch(lock, sent);
  stats_.record_acquire_latency(Clock::now() - called);
  return LockGuard(shared_from_this(), std::move(hold));
}

}  // namespace dlock::detail
