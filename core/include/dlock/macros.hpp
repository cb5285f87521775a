#pragma once
// The block and scope forms of a distributed lock.
//
//   WITH_DISTRIBUTED_LOCK("stock:" + sku) { deduct(); }   // throws LockTimeoutError if not had in the wait
//   WITH_DISTRIBUTED_LOCK("stock:{}", sku) { deduct(); }  // the same key from a template (fmt syntax)
//   WITH_DISTRIBUTED_LOCK_OPTS(key, (dlock::LockOptions{.wait = 500ms})) { ... }
//   DISTRIBUTED_LOCK_SCOPE("order:{}:{}", user_id, order_id);  // held to the end of the enclosing scope
//
// With one argument the key is used as it is; with more, the first is a
// template checked at compile time (see lock_key.hpp).
//
// The body runs holding the lock; leaving it any way (end, break, continue,
// return, exception) releases it. Inside a class derived from dlock::LockAware
// the injected service is used, elsewhere the default service
// (dlock::set_default_lock_service); with neither, a dlock::Error is thrown
// before the body runs. The block form is one if-else statement, so a
// following `else` never binds to it by mistake.

#include "dlock/default_service.hpp"
#include "dlock/lock_aware.hpp"
#include "dlock/lock_guard.hpp"
#include "dlock/lock_key.hpp"

#define DLOCK_CONCAT_INNER(a, b) a##b
#define DLOCK_CONCAT(a, b) DLOCK_CONCAT_INNER(a, b)

#define WITH_DISTRIBUTED_LOCK_OPTS(key, options)                                                     \
  if (::dlock::LockGuard DLOCK_CONCAT(dlock_guard_, __LINE__) = dlock_current_lock_service()->lock( \
          (key), (options));                                                                        \
      false) {                                                                                      \
  } else

#define WITH_DISTRIBUTED_LOCK(...) WITH_DISTRIBUTED_LOCK_OPTS(::dlock::lock_key(__VA_ARGS__), ::dlock::LockOptions{})

#define DISTRIBUTED_LOCK_SCOPE(...)                                  \
  ::dlock::LockGuard DLOCK_CONCAT(dlock_scope_guard_, __LINE__) = \
      dlock_current_lock_service()->lock(::dlock::lock_key(__VA_ARGS__))
