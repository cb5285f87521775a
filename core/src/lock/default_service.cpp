// The default lock service the macros use outside a LockAware class: one atomic slot,
// and the error that says how to fill it.
#include "dlock/default_service.hpp"

#include <atomic>

namespace dlock {
namespace {

std::atomic<std::shared_ptr<RedisLockService>>& default_slot() {
  static std::atomic<std::shared_ptr<RedisLockService>> slot;
  return slot;
}

}  // namespace

void set_default_lock_service(std::shared_ptr<RedisLockService> service) { default_slot().store(std::move(service)); }

std::shared_ptr<RedisLockService> default_lock_service() {
  auto service = default_slot().load();
  if (!service) {
    throw Error(
        "no default lock service: call dlock::set_default_lock_service(dlock::make_lock_service(config)) at start-up, "
        "or use the macros inside a class derived from dlock::LockAware");
  }
  return service;
}

}  // namespace dlock

std::shared_ptr<dlock::RedisLockService> dlock_current_lock_service() { return dlock::default_lock_service(); }
