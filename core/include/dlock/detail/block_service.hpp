#pragma once
// Which service a block or scope form uses. The macros call
// dlock_current_lock_service() by unqualified name, so the nearest
// declaration wins: a DISTRIBUTED_LOCK_SERVICE(...) in an enclosing block,
// else LockAware's member inside its classes' member functions, else the
// process default (default_service.hpp). A static member function or a
// lambda that does not capture `this` cannot reach LockAware's member: there
// the macros do not compile rather than fall back to another service.

#include <memory>
#include <type_traits>

#include "dlock/errors.hpp"
#include "dlock/lock_service.hpp"

namespace dlock::detail {

template <typename>
inline constexpr bool always_false_v = false;

// What DISTRIBUTED_LOCK_SERVICE(service) declares: a callable that hands the
// macros that service. Holds a shared_ptr when given one, so the service
// lives as long as the scope that named it.
class ServiceHandle {
 public:
  ServiceHandle(RedisLockService& service) : service_(&service) {}
  ServiceHandle(RedisLockService* service) : service_(service) {
    if (!service) throw InvalidArgument("DISTRIBUTED_LOCK_SERVICE was given a null RedisLockService pointer");
  }
  ServiceHandle(std::shared_ptr<RedisLockService> service) : owned_(std::move(service)), service_(owned_.get()) {
    if (!service_) throw InvalidArgument("DISTRIBUTED_LOCK_SERVICE was given an empty shared_ptr");
  }
  template <typename Other>
  ServiceHandle(Other&&) {
    static_assert(always_false_v<Other>,
                  "DISTRIBUTED_LOCK_SERVICE needs a dlock::RedisLockService: a reference, a pointer or a shared_ptr "
                  "(inside a LockAware class: lock_service())");
  }

  template <typename... Tag>  // the macros' tag, ignored
  RedisLockService& operator()(Tag...) const {
    return *service_;
  }

 private:
  std::shared_ptr<RedisLockService> owned_;
  RedisLockService* service_ = nullptr;
};

// The macros' call of dlock_current_lock_service passes one of these: an
// argument whose type depends on a template parameter makes the call
// dependent, so `requires` can ask whether it compiles where the macro is
// used instead of the call failing with a compiler's own words.
template <typename>
struct ServiceLookup {};

// Reached only where no service is in scope: a message saying what to write.
template <typename Where>
RedisLockService& no_service_in_scope() {
  static_assert(always_false_v<Where>,
                "a dlock macro found no lock service here: name one first with DISTRIBUTED_LOCK_SERVICE(service); "
                "a static member function of a LockAware class, a lambda that does not capture `this`, and "
                "(with DLOCK_NO_DEFAULT_SERVICE) a free function have none of their own");
  throw Error("no lock service in scope");
}

inline RedisLockService& service_of(RedisLockService& service) { return service; }
inline RedisLockService& service_of(const std::shared_ptr<RedisLockService>& service) {
  if (!service) throw Error("a dlock macro found a null lock service; name a live one with DISTRIBUTED_LOCK_SERVICE");
  return *service;
}

}  // namespace dlock::detail
