// Must not compile: the service named by DISTRIBUTED_LOCK_SERVICE in the
// enclosing function is not captured by the lambda, and the lambda must not
// fall back to another service. Fix: capture it, or name it inside.
#include <dlock/dlock.hpp>

void restock(dlock::RedisLockService& service) {
  DISTRIBUTED_LOCK_SERVICE(service);
  auto work = [] {
    WITH_DISTRIBUTED_LOCK("stock") {}
  };
  work();
}
