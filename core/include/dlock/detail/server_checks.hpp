#pragma once
// Settings of the server that would break a promise quietly, checked once at
// start-up on every master (each of a cluster's) and reported at warn level.
// A user who may not run INFO (ACL) or a failed read only leaves a debug line.

#include <spdlog/logger.h>

#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// Lock keys carry a TTL, so every maxmemory-policy but noeviction may evict a
// held lock under memory pressure, and a second owner gets in: reads INFO
// memory and warns if maxmemory is set with an evicting policy.
void warn_if_evicting(RedisExecutor& redis, spdlog::logger& logger);

// With lock.replica_acks N, a master with fewer than N replicas connected
// grants no lock at all: reads INFO replication and warns if so.
void warn_if_too_few_replicas(RedisExecutor& redis, spdlog::logger& logger, int wanted);

}  // namespace dlock::detail
