// Semaphore: a handle's calls passed to the service core, with the handle's count used
// until the first acquisition creates the count in Redis.
#include "dlock/semaphore.hpp"

#include <algorithm>

#include "dlock/detail/service_core.hpp"

namespace dlock {

LockGuard Semaphore::acquire(long long permits, LockOptions options) const {
  return core_->acquire_shared({detail::SharedKind::permits, name_, permits, count_if_new_}, options, true);
}

LockGuard Semaphore::try_acquire(long long permits, LockOptions options) const {
  if (!options.wait) options.wait = Millis(0);
  return core_->acquire_shared({detail::SharedKind::permits, name_, permits, count_if_new_}, options, false);
}

std::shared_ptr<detail::AsyncOperation> Semaphore::start_async(long long permits, LockOptions options,
                                                               bool throw_on_timeout, detail::AsyncDone done) const {
  if (!throw_on_timeout && !options.wait) options.wait = Millis(0);
  // Without an owner, each async acquisition is its own: never one by the thread it happens to start on.
  if (!options.owner) options.owner = Owner::create();
  detail::AsyncRequest request{detail::AsyncRequest::Kind::permits, name_, options, throw_on_timeout, permits,
                               count_if_new_};
  return core_->acquire_async(std::move(request), std::move(done));
}

void Semaphore::set_permits(long long permits) const { core_->set_permits(name_, permits); }

long long Semaphore::permits() const {
  const auto [count, used] = core_->permits_of(name_);
  return count >= 0 ? count : count_if_new_;
}

long long Semaphore::available() const {
  const auto [count, used] = core_->permits_of(name_);
  return std::max(0LL, (count >= 0 ? count : count_if_new_) - used);
}

}  // namespace dlock
