// The watchdog's answer to a master reset (RedisExecutor::watch_resets): every renewed
// lock falls due at once, so one round tells the holders whose locks the master forgot.
#include <string>
#include <utility>
#include <vector>

#include "renewal/watchdog_state.hpp"

namespace dlock::detail {

void Watchdog::State::follow_resets(const std::shared_ptr<State>& state) {
  // A weak reference: the executor's thread must never keep the watchdog's state alive.
  state->resets = state->redis->watch_resets([weak = std::weak_ptr<State>(state)](const std::string& what) {
    if (const auto alive = weak.lock()) alive->on_reset(what);
  });
}

void Watchdog::State::on_reset(const std::string& what) {
  {
    std::lock_guard guard(mutex);
    if (stopping) return;
    reset = what;  // several before the scheduler acts: one round serves them all
  }
  wake.notify_one();
}

void Watchdog::State::renew_all_now(std::unique_lock<std::mutex>& guard) {
  if (reset.empty()) return;
  const std::string what = std::exchange(reset, std::string());
  const Clock::time_point now = Clock::now();
  std::vector<std::shared_ptr<HeldLock>> due_now;
  std::size_t renewed = 0;
  for (const auto& [key, entry] : watched) {
    // A fixed lease is never renewed (a renewal would extend it): its holder
    // learns from its release, or from its clock when the lease ends.
    if (!entry.lock->renewed.load()) continue;
    ++renewed;
    // One on the wire may have been sent before the master came back: it goes again once it returns.
    if (entry.in_flight) {
      renew_again.insert(key);
    } else {
      due_now.push_back(entry.lock);
    }
  }
  for (const auto& lock : due_now) plan_locked(lock, now, Plan::other);
  // The service's registry entry is gone with the data too: the beat writes it again.
  if (beat) beat_due = std::min(beat_due, now);
  guard.unlock();
  if (renewed > 0) {
    logger->info("watchdog: {}; renewing the {} lock(s) held now", what, renewed);
  } else {
    logger->debug("watchdog: {}; no lock held to renew", what);
  }
  guard.lock();
}

}  // namespace dlock::detail
