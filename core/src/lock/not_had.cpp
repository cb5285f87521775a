// Why an acquisition was not had within its wait, said alike by every
// primitive: the lock, the read and write locks, a semaphore's permits (and,
// through them, lock_all). A grant too few replicas acknowledged is named as
// such, never as "busy".
#include <string>

#include "dlock/detail/service_core.hpp"
#include "dlock/errors.hpp"

namespace dlock::detail {

void ServiceCore::throw_not_had(const NotHad& why) const {
  if (!why.unacknowledged.empty()) {
    throw LockTimeoutError(why.what + ": granted, but not acknowledged by enough replicas (" + why.unacknowledged +
                           "), so not taken; check the replicas (INFO replication: connected_slaves, lag) or lower "
                           "lock.replica_acks, or raise lock.replica_ack_timeout_ms");
  }
  if (why.tried_once) {
    throw LockTimeoutError(why.what + ": busy; tried once, without waiting: " + why.busy +
                           "; to wait for it, pass a wait (LockOptions::wait, or lock.wait_ms in the config)");
  }
  throw LockTimeoutError(why.what + ": still busy after waiting " + std::to_string(why.waited.count()) + " ms: " +
                         why.busy + "; wait longer (LockOptions::wait or lock.wait_ms) or use " + why.try_form);
}

}  // namespace dlock::detail
