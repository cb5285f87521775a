#pragma once
// What `dlock list` finds under the prefix: SCAN (never KEYS, which blocks
// Redis) on every master — a Cluster's each, every node of a Redlock — for
// the hashes of the keys matching PATTERN. A lock is its hash P{K}; a
// read-write lock shows by its writer's hash P{K}:rw:write or a reader's
// record P{K}:rw:readers:<id>, a semaphore by a holder's record
// P{K}:semaphore:holders:<id>: one pass finds them all.

#include <set>
#include <string>

#include "dlock/redis_executor.hpp"

namespace dlock::cli {

struct FoundNames {
  std::set<std::string> locks;       // lock names, P{K}
  std::set<std::string> read_write;  // keys K with a writer or reader record
  std::set<std::string> semaphores;  // keys K with a holder's record
};

// Throws RedisError if Redis refuses SCAN (a missing right); ConnectionError
// if a Cluster's master, or a majority of a Redlock's nodes, cannot be reached.
FoundNames scan_names(RedisExecutor& redis, const std::string& prefix, const std::string& pattern);

}  // namespace dlock::cli
