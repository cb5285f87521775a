#pragma once
// Wires a RedisLockService from a Config.

#include <memory>

#include <spdlog/logger.h>

#include "dlock/config.hpp"
#include "dlock/lock_service.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock {

// The executor the config's redis.mode asks for (standalone, Sentinel or
// Cluster; TLS as redis.tls says). With `connect`, connects at once, so a
// wrong address, password or certificate fails here with ConnectionError.
// redis.tls.verify: false is logged as a warning to `logger` (default: the
// "dlock" logger), once per process and server.
std::shared_ptr<RedisExecutor> make_executor(const RedisConfig& config, bool connect = true,
                                             std::shared_ptr<spdlog::logger> logger = nullptr);

// Connects at once (PING, AUTH, SELECT, script load): an unreachable or
// refusing Redis fails here with ConnectionError, not on the first lock.
// With no logger given, uses make_logger(config.logging).
std::shared_ptr<RedisLockService> make_lock_service(const Config& config,
                                                    std::shared_ptr<spdlog::logger> logger = nullptr);

}  // namespace dlock
