#pragma once
// redis.tls.verify: false turns off every certificate check, which lets
// anyone on the path pose as the server. It is allowed (test set-ups,
// self-signed servers) but never silent.

#include <spdlog/logger.h>

#include "dlock/config.hpp"

namespace dlock::detail {

// Logs a warning when `config` uses TLS without verification: once per
// process for each server and name, however many executors are made for it.
void warn_if_unverified(const RedisConfig& config, spdlog::logger& logger);

}  // namespace dlock::detail
