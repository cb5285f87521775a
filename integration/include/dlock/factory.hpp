#pragma once
// Wires a RedisLockService from a Config.

#include <memory>

#include <spdlog/logger.h>

#include "dlock/config.hpp"
#include "dlock/lock_service.hpp"

namespace dlock {

// Connects at once (PING, AUTH, SELECT, script load): an unreachable or
// refusing Redis fails here with ConnectionError, not on the first lock.
// With no logger given, uses make_logger(config.logging).
std::shared_ptr<RedisLockService> make_lock_service(const Config& config,
                                                    std::shared_ptr<spdlog::logger> logger = nullptr);

}  // namespace dlock
