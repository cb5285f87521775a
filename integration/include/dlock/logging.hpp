#pragma once
// spdlog set-up: the logger named "dlock", writing to stderr at logging.level.

#include <memory>

#include <spdlog/logger.h>

#include "dlock/config.hpp"

namespace dlock {

// Returns the registered "dlock" logger (creating it on first use) set to the
// configured level. Throws ConfigError for an unknown level name.
std::shared_ptr<spdlog::logger> make_logger(const LoggingConfig& config);

}  // namespace dlock
