#pragma once
// `dlock unlock --force --read-write KEY` and `--semaphore KEY`
// (RedisLockService::force_unlock_read_write(), force_release_permits()): the holders'
// records of KEY's read-write lock (its writer and readers) or semaphore (its
// permits) deleted, and the line woken as a release wakes it, in one script
// (inspection_scripts.hpp: force_release_records). The holders learn it at their
// watchdog's next renewal, as a lock's holder does.

#include <string>
#include <string_view>
#include <vector>

#include "dlock/lock_options.hpp"
#include "dlock/lock_status.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::detail {

enum class SharedPart { read_write, semaphore };

// Removes the holders of `key`'s `part` (only `owner`'s, unless empty).
// Throws RedisError for a refusal, ConnectionError when Redis cannot be reached.
std::vector<RemovedHolder> force_release_holders(RedisExecutor& redis, const LockConfig& config,
                                                 std::string_view key, SharedPart part, std::string_view owner);

}  // namespace dlock::detail
