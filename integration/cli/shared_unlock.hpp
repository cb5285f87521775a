#pragma once
// `dlock unlock --force --read-write KEY` and `--semaphore KEY`: the holders'
// records of KEY's read-write lock (its writer and readers) or semaphore (its
// permits) deleted, and the line woken as a release wakes it, in one script
// (scripts/force_release_records.lua). The holders learn it at their
// watchdog's next renewal, as a lock's holder does.

#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::cli {

struct RemovedHolder {
  std::string token;
  long long count = 0;  // re-entry depth, or permits held
  bool writer = false;  // a read-write lock's writer (else a reader, or a semaphore's holder)
};

enum class SharedPart { read_write, semaphore };

// Removes the holders of `key`'s `part` (only `owner`'s, unless empty).
// Throws RedisError for a refusal, ConnectionError when Redis cannot be reached.
std::vector<RemovedHolder> force_release_holders(RedisExecutor& redis, const LockConfig& config,
                                                 const std::string& key, SharedPart part, const std::string& owner);

}  // namespace dlock::cli
