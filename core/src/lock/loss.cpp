// Loss: a lock found no longer this owner's is marked lost once, unwatched,
// logged, and reported to the on_lost hook on the notifier's thread.
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "dlock/detail/service_core.hpp"

namespace dlock::detail {

void ServiceCore::set_on_lost(std::function<void(const std::string&)> hook) {
  // Its thread starts now, not at the first loss, when every millisecond counts.
  if (hook) notifier_.start();
  std::lock_guard guard(mutex_);
  on_lost_ = std::move(hook);
}

void ServiceCore::handle_lost(const std::shared_ptr<HeldLock>& lock, const std::string& why) {
  if (lock->loss_claimed.exchange(true)) return;
  watchdog_.unwatch(*lock);
  logger_->error("{} lost by owner {}: {}; its holder may now overlap another holder and should stop (fencing token {})",
                 lock->label(), lock->owner, why, lock->fencing_token);
  // In this order: a holder that sees lost() (and so may stop, throw, or read
  // the log) finds the loss logged already; whoever sees it counted in
  // stats() finds lost() true.
  lock->lost_flag.store(true);
  lock->stop.request_stop();
  stats_.lost.fetch_add(1, std::memory_order_relaxed);
  std::function<void(const std::string&)> hook;
  {
    std::lock_guard guard(mutex_);
    hook = on_lost_;
  }
  // On a thread of its own: a slow hook delays neither renewals nor other locks' loss.
  if (hook) notifier_.post(std::move(hook), lock->key);
}

}  // namespace dlock::detail
