#pragma once
// Base for services that take the lock service by constructor injection.
// Inside its members the dlock macros use the injected service, not the
// process default.

#include <memory>

#include "dlock/default_service.hpp"
#include "dlock/errors.hpp"
#include "dlock/lock_service.hpp"

namespace dlock {

class LockAware {
 public:
  // Throws InvalidArgument for a null service.
  explicit LockAware(std::shared_ptr<RedisLockService> service) : service_(std::move(service)) {
    if (!service_) throw InvalidArgument("LockAware needs a RedisLockService; got a null pointer");
  }

  RedisLockService& lock_service() const { return *service_; }

 protected:
  // Found by the macros' unqualified call before the global default (the
  // tag the call passes is ignored; see block_service.hpp).
  template <typename... Tag>
  std::shared_ptr<RedisLockService> dlock_current_lock_service(Tag...) const {
    return service_;
  }

 private:
  std::shared_ptr<RedisLockService> service_;
};

}  // namespace dlock
