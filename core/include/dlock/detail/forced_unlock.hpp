#pragma once
// A lock's forced release (`dlock unlock --force KEY`,
// RedisLockService::force_unlock()): the lock scripts' force_release run on
// one Redis or on every node of a Redlock, and what it did, owner by owner
// (ForcedUnlock in lock_status.hpp).

#include <string_view>

#include "dlock/lock_options.hpp"
#include "dlock/lock_status.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// Runs the forced release of `key`'s lock. Throws RedisError for a refusal
// (on a Redlock, one a majority gave alike) and ConnectionError when Redis
// cannot be reached; on a Redlock whose majority did not answer, returns what
// the others did (majority_answered() false).
ForcedUnlock force_unlock(RedisExecutor& redis, const LockConfig& config, std::string_view key);

}  // namespace dlock::detail
