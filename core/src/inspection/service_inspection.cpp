// RedisLockService's inspection and forced releases: the reads and scripts `dlock status`
// and `dlock unlock --force` run, on the service's own executor, refusals thrown.
#include <spdlog/spdlog.h>

#include "dlock/detail/forced_unlock.hpp"
#include "dlock/detail/inspection_scripts.hpp"
#include "dlock/detail/lock_reading.hpp"
#include "dlock/detail/service_core.hpp"
#include "dlock/detail/shared_reading.hpp"
#include "dlock/detail/shared_unlock.hpp"
#include "dlock/lock_service.hpp"

namespace dlock {

namespace {

// Read-write locks and semaphores live on one Redis; a Redlock's nodes have neither.
void refuse_on_redlock(RedisExecutor& redis, std::string_view what, std::string_view key) {
  if (redis.quorum_nodes().empty()) return;
  throw InvalidArgument(std::string(what) + " '" + std::string(key) + "': a Redlock (redis.mode: redlock) offers "
                        "neither read-write locks nor semaphores, so there is none to read or release");
}

detail::SharedReading read_shared(detail::ServiceCore& core, std::string_view what, std::string_view key) {
  core.validate(key, {});
  RedisExecutor& redis = core.redis();
  refuse_on_redlock(redis, what, key);
  detail::LoadedScript script(redis, detail::kSharedStatusScript.source,
                              "read a read-write lock's and a semaphore's status");
  detail::HolderDirectory holders(redis, core.config().key_prefix);
  return detail::read_shared_status(script, holders, redis.endpoint(), core.config(), key);
}

std::vector<RemovedHolder> force_release_shared(detail::ServiceCore& core, std::string_view what,
                                                std::string_view key, detail::SharedPart part,
                                                std::string_view owner) {
  core.validate(key, {});
  refuse_on_redlock(core.redis(), what, key);
  std::vector<RemovedHolder> removed = detail::force_release_holders(core.redis(), core.config(), key, part, owner);
  for (const RemovedHolder& holder : removed) {
    core.logger().warn("forced release of {} '{}': removed {} {} (count {}); that holder no longer holds it", what,
                       key, holder.writer ? "writer" : "holder", holder.owner, holder.count);
  }
  return removed;
}

}  // namespace

LockStatus RedisLockService::status(std::string_view key) const {
  core_->validate(key, {});
  RedisExecutor& redis = core_->redis();
  detail::NodeScript script(redis, detail::kLockStatusScript.source, "read a lock's status");
  detail::HolderDirectory holders(redis, core_->config().key_prefix);
  detail::LockReading reading = detail::read_lock_status(script, holders, redis.endpoint(), core_->config(), key);
  if (reading.refusal) detail::throw_refusal(reading.refusal);
  return std::move(reading.status);
}

bool RedisLockService::locked(std::string_view key) const { return status(key).held(); }

std::optional<std::chrono::milliseconds> RedisLockService::lease_left(std::string_view key) const {
  return status(key).lease_left;
}

ForcedUnlock RedisLockService::force_unlock(std::string_view key) {
  core_->validate(key, {});
  const ForcedUnlock done = detail::force_unlock(core_->redis(), core_->config(), key);
  for (const RemovedOwner& owner : done.owners) {
    core_->logger().warn("forced unlock of '{}': removed owner {} (hold count {}) on {} of {} node(s)", key,
                         owner.owner, owner.hold_count, owner.nodes, done.nodes);
  }
  if (!done.majority_answered()) {
    throw ConnectionError("redlock: only " + std::to_string(done.answered) + " of " + std::to_string(done.nodes) +
                          " nodes answered the forced unlock of '" + std::string(key) +
                          "'; it was done on those; call force_unlock again once a majority of the nodes answer");
  }
  return done;
}

ReadWriteLockStatus RedisLockService::read_write_status(std::string_view key) const {
  detail::ReadWriteReading reading = read_shared(*core_, "read-write lock", key).read_write;
  if (reading.refusal) detail::throw_refusal(reading.refusal);
  return std::move(reading.status);
}

SemaphoreStatus RedisLockService::semaphore_status(std::string_view name) const {
  detail::SemaphoreReading reading = read_shared(*core_, "semaphore", name).semaphore;
  if (reading.refusal) detail::throw_refusal(reading.refusal);
  return std::move(reading.status);
}

std::vector<RemovedHolder> RedisLockService::force_unlock_read_write(std::string_view key, std::string_view owner) {
  return force_release_shared(*core_, "read-write lock", key, detail::SharedPart::read_write, owner);
}

std::vector<RemovedHolder> RedisLockService::force_release_permits(std::string_view name, std::string_view owner) {
  return force_release_shared(*core_, "semaphore", name, detail::SharedPart::semaphore, owner);
}

}  // namespace dlock
