#pragma once
// Lock keys carry a TTL, so every maxmemory-policy but noeviction may evict a
// held lock under memory pressure, and a second owner gets in. A service
// checks once, at start-up, and says so at warn level.

#include <spdlog/logger.h>

#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// Reads INFO memory; warns if maxmemory is set with an evicting policy. A user
// who may not run INFO (ACL) or a failed read only leaves a debug line.
void warn_if_evicting(RedisExecutor& redis, spdlog::logger& logger);

}  // namespace dlock::detail
