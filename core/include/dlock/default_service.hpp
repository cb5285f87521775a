#pragma once
// The process-wide default lock service that the macros use outside a
// LockAware class.

#include <memory>

#include "dlock/lock_service.hpp"

namespace dlock {

// Sets (or, with nullptr, clears) the default service. Thread-safe; a block
// already inside a macro keeps the service it started with.
void set_default_lock_service(std::shared_ptr<RedisLockService> service);

// The default service; throws dlock::Error if none was set.
std::shared_ptr<RedisLockService> default_lock_service();

}  // namespace dlock

// What the macros call, by unqualified name. Inside a member function of a
// class derived from dlock::LockAware, name lookup finds LockAware's member of
// the same name first (class scope before namespace scope), so the macros use
// that object's injected service; a DISTRIBUTED_LOCK_SERVICE(...) in an
// enclosing block comes before both; everywhere else they find this one.
//
// A translation unit that defines DLOCK_NO_DEFAULT_SERVICE before including
// dlock does not see it: there a macro outside a LockAware class and without
// DISTRIBUTED_LOCK_SERVICE does not compile, instead of using the default.
#ifndef DLOCK_NO_DEFAULT_SERVICE
std::shared_ptr<dlock::RedisLockService> dlock_current_lock_service();
// The macros' call passes a tag, so that the call is checked where it is
// used (block_service.hpp's service_here): the tag is ignored.
template <typename Tag>
std::shared_ptr<dlock::RedisLockService> dlock_current_lock_service(Tag) {
  return dlock_current_lock_service();
}
#endif
