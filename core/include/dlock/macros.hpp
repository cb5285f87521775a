#pragma once
// The block and scope forms of a distributed lock, the C++ counterpart of
// lock4j's @Lock4j and Redisson's lock()/unlock() pair.
//
//   WITH_DISTRIBUTED_LOCK("stock:" + sku) { deduct(); }   // throws LockTimeoutError if not had in the wait
//   WITH_DISTRIBUTED_LOCK("stock:{}", sku) { deduct(); }  // the same key from a template (fmt syntax)
//   WITH_DISTRIBUTED_LOCK("stock:{}", sku, {.wait = 500ms, .lease = 10s}) { ... }   // options last
//   WITH_DISTRIBUTED_LOCK_AS(guard, "order:{}", id) { pay(order, guard.fencing_token()); }
//   WITH_DISTRIBUTED_LOCK_IF_FREE("job:{}", name) { run(); } else { skipped(); }  // tries once
//   DISTRIBUTED_LOCK_SCOPE("order:{}:{}", user_id, order_id);  // held to the end of the enclosing scope
//   DISTRIBUTED_LOCK_SCOPE_AS(guard, "order:{}", id);           // the same, with the guard named
//   DISTRIBUTED_LOCK_SERVICE(service);  // the forms below it in this block use `service`
//   WITH_DISTRIBUTED_LOCKS(order.skus) { ... }              // every key of a range, or none (lock_all)
//   WITH_DISTRIBUTED_LOCKS("stock:{}", order.skus) { ... }  // one key per value of a range
//   WITH_DISTRIBUTED_LOCKS({"stock:1", "stock:2"}, {.wait = 500ms}) { ... }
//   WITH_DISTRIBUTED_LOCKS_AS(locks, "stock:{}", skus) { pay(locks.fencing_token("stock:1")); }
//   WITH_DISTRIBUTED_LOCKS_IF_FREE(keys) { ... } else { skipped(); }
//   WITH_DISTRIBUTED_READ_LOCK("prices:{}", region) { read(); }    // the forms of WITH_DISTRIBUTED_LOCK
//   WITH_DISTRIBUTED_WRITE_LOCK("prices:{}", region) { rewrite(); }
//   WITH_DISTRIBUTED_PERMIT(payments) { call(); }       // one permit of a Semaphore handle...
//   WITH_DISTRIBUTED_PERMIT("payments", {.wait = 2s})   // ...or of a semaphore by name (its count set in Redis)
//
// Arguments: one is a key as it is; with more, the first is a template whose
// fields and values are checked at compile time (lock_key.hpp). Options, if
// any, come last: a braced BlockOptions ({.wait = 500ms, .lease = 10s,
// .throw_if_lost = true}), or a LockOptions or BlockOptions value.
//
// The body runs holding the lock; leaving it any way (end, break, continue,
// return, exception) releases it. The block forms are one if-else statement:
// a following `else` binds to WITH_DISTRIBUTED_LOCK_IF_FREE, whose else
// branch runs when the lock was busy, and never to the other forms.
//
// A lock lost while the body runs is logged once, when it is found; with
// .throw_if_lost = true, leaving the body normally then throws LockLostError
// instead (see BlockOptions). The named guard offers the same by hand:
// guard.check() before an irreversible step, guard.unlock() at the end.
//
// Which service: a DISTRIBUTED_LOCK_SERVICE(...) in an enclosing block;
// else, inside a member function of a class derived from dlock::LockAware,
// its injected service; else the default service
// (dlock::set_default_lock_service; with none set, a dlock::Error before the
// body runs). A static member function or a lambda of a LockAware class that
// does not capture `this` must name its service with DISTRIBUTED_LOCK_SERVICE:
// without it the forms do not compile, rather than fall back to the default.
// Define DLOCK_NO_DEFAULT_SERVICE before including dlock and they do not
// compile outside LockAware classes either.

#include "dlock/default_service.hpp"
#include "dlock/detail/block_guard.hpp"
#include "dlock/detail/block_keys_request.hpp"
#include "dlock/detail/block_multi_guard.hpp"
#include "dlock/detail/block_request.hpp"
#include "dlock/detail/block_service.hpp"
#include "dlock/lock_aware.hpp"
#include "dlock/lock_guard.hpp"
#include "dlock/lock_key.hpp"

#define DLOCK_CONCAT_INNER(a, b) a##b
#define DLOCK_CONCAT(a, b) DLOCK_CONCAT_INNER(a, b)
// A name of its own for each use, even for several uses on one line (a user's own macro).
#define DLOCK_UNIQUE_NAME(base) DLOCK_CONCAT(base, __COUNTER__)
// The service in scope, or a static_assert naming DISTRIBUTED_LOCK_SERVICE
// where there is none: a generic lambda, so the lookup is checked (requires)
// rather than failing in the compiler's words. It returns what the lookup
// found (a shared_ptr lives to the end of the macro's statement, as before).
#define DLOCK_SERVICE_HERE()                                                                                 \
  ::dlock::detail::service_of([&]<typename DlockWhere = void>() -> decltype(auto) {                         \
    if constexpr (requires { dlock_current_lock_service(::dlock::detail::ServiceLookup<DlockWhere>{}); }) { \
      return dlock_current_lock_service(::dlock::detail::ServiceLookup<DlockWhere>{});                       \
    } else {                                                                                                 \
      return ::dlock::detail::no_service_in_scope<DlockWhere>();                                             \
    }                                                                                                        \
  }())
// The same lookup without the lambda, for the coroutine forms: a closure in
// an expression that co_awaits is kept in the coroutine's frame, and a frame
// of a coroutine defined in a header then has a member of a type without
// linkage (g++ -Wsubobject-linkage, on by default). Where no service is in
// scope this fails in the compiler's words, not with the static_assert.
#define DLOCK_SERVICE_HERE_PLAIN() \
  ::dlock::detail::service_of(dlock_current_lock_service(::dlock::detail::ServiceLookup<void>{}))

#define WITH_DISTRIBUTED_LOCK_AS(guard, ...)                                                       \
  if (::dlock::detail::BlockGuard guard = ::dlock::detail::BlockGuard::lock(                       \
          DLOCK_SERVICE_HERE(), ::dlock::detail::block_request(__VA_ARGS__));                      \
      false) {                                                                                     \
  } else

#define WITH_DISTRIBUTED_LOCK(...) WITH_DISTRIBUTED_LOCK_AS(DLOCK_UNIQUE_NAME(dlock_guard_), __VA_ARGS__)

// The same as WITH_DISTRIBUTED_LOCK; its name says that options follow.
#define WITH_DISTRIBUTED_LOCK_OPTS(...) WITH_DISTRIBUTED_LOCK(__VA_ARGS__)

// Runs the body only if the lock is had: at once (no wait in the options) or
// within the options' wait; else the `else` branch, if any (lock4j's skip).
#define WITH_DISTRIBUTED_LOCK_IF_FREE_AS(guard, ...)                                               \
  if (::dlock::detail::BlockGuard guard = ::dlock::detail::BlockGuard::try_lock(                   \
          DLOCK_SERVICE_HERE(), ::dlock::detail::block_request(__VA_ARGS__));                      \
      guard)

#define WITH_DISTRIBUTED_LOCK_IF_FREE(...) \
  WITH_DISTRIBUTED_LOCK_IF_FREE_AS(DLOCK_UNIQUE_NAME(dlock_guard_), __VA_ARGS__)

#define DISTRIBUTED_LOCK_SCOPE_AS(guard, ...) \
  ::dlock::detail::BlockGuard guard =         \
      ::dlock::detail::BlockGuard::lock(DLOCK_SERVICE_HERE(), ::dlock::detail::block_request(__VA_ARGS__))

#define DISTRIBUTED_LOCK_SCOPE(...) DISTRIBUTED_LOCK_SCOPE_AS(DLOCK_UNIQUE_NAME(dlock_scope_guard_), __VA_ARGS__)

// `service`: a RedisLockService reference, pointer or shared_ptr; inside a
// LockAware class, for instance, some_object.lock_service().
#define DISTRIBUTED_LOCK_SERVICE(service) \
  [[maybe_unused]] const ::dlock::detail::ServiceHandle dlock_current_lock_service{service}

// A set of keys taken together (RedisLockService::lock_all): the body runs
// holding all of them; a key not had within the wait releases the others and
// throws LockTimeoutError. Arguments: a range of keys or a braced list, or a
// template of one field and a range of values; options last, as above.
#define WITH_DISTRIBUTED_LOCKS_AS(guard, ...)                                                      \
  if (::dlock::detail::BlockMultiGuard guard = ::dlock::detail::BlockMultiGuard::lock(             \
          DLOCK_SERVICE_HERE(), ::dlock::detail::block_keys_request(__VA_ARGS__));                 \
      false) {                                                                                     \
  } else

#define WITH_DISTRIBUTED_LOCKS(...) WITH_DISTRIBUTED_LOCKS_AS(DLOCK_UNIQUE_NAME(dlock_guards_), __VA_ARGS__)

// Runs the body only if every key is had (at once, or within the options'
// wait); else the `else` branch, if any, holding none of them.
#define WITH_DISTRIBUTED_LOCKS_IF_FREE_AS(guard, ...)                                              \
  if (::dlock::detail::BlockMultiGuard guard = ::dlock::detail::BlockMultiGuard::try_lock(         \
          DLOCK_SERVICE_HERE(), ::dlock::detail::block_keys_request(__VA_ARGS__));                 \
      guard)

#define WITH_DISTRIBUTED_LOCKS_IF_FREE(...) \
  WITH_DISTRIBUTED_LOCKS_IF_FREE_AS(DLOCK_UNIQUE_NAME(dlock_guards_), __VA_ARGS__)

// A read or write lock (RedisLockService::read_lock/write_lock): the same
// arguments as WITH_DISTRIBUTED_LOCK; the _AS forms name the guard.
#define WITH_DISTRIBUTED_READ_LOCK_AS(guard, ...)                                                  \
  if (::dlock::detail::BlockGuard guard = ::dlock::detail::BlockGuard::read_lock(                  \
          DLOCK_SERVICE_HERE(), ::dlock::detail::block_request(__VA_ARGS__));                      \
      false) {                                                                                     \
  } else
#define WITH_DISTRIBUTED_READ_LOCK(...) WITH_DISTRIBUTED_READ_LOCK_AS(DLOCK_UNIQUE_NAME(dlock_guard_), __VA_ARGS__)

#define WITH_DISTRIBUTED_WRITE_LOCK_AS(guard, ...)                                                 \
  if (::dlock::detail::BlockGuard guard = ::dlock::detail::BlockGuard::write_lock(                 \
          DLOCK_SERVICE_HERE(), ::dlock::detail::block_request(__VA_ARGS__));                      \
      false) {                                                                                     \
  } else
#define WITH_DISTRIBUTED_WRITE_LOCK(...) WITH_DISTRIBUTED_WRITE_LOCK_AS(DLOCK_UNIQUE_NAME(dlock_guard_), __VA_ARGS__)

// One permit of a semaphore for the body: a Semaphore handle, or a name
// (then the service in scope is asked for it, and its count must be set in
// Redis); options last. Throws LockTimeoutError if none is free in the wait.
#define WITH_DISTRIBUTED_PERMIT_AS(guard, ...)                                                     \
  if (::dlock::detail::BlockGuard guard = ::dlock::detail::BlockGuard::permit(                     \
          [&]() -> ::dlock::RedisLockService& { return DLOCK_SERVICE_HERE(); }, __VA_ARGS__);      \
      false) {                                                                                     \
  } else
#define WITH_DISTRIBUTED_PERMIT(...) WITH_DISTRIBUTED_PERMIT_AS(DLOCK_UNIQUE_NAME(dlock_guard_), __VA_ARGS__)
