// make_logger: the one "dlock" spdlog logger, created once even when services start at
// once, set to logging.level.
#include "dlock/logging.hpp"

#include <mutex>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "config/config_validation.hpp"
#include "dlock/errors.hpp"

namespace dlock {

std::shared_ptr<spdlog::logger> make_logger(const LoggingConfig& config) {
  // Checked again here, not only in load_config, for a Config built in code.
  const auto level = detail::log_level_from_name(config.level);
  if (!level) {
    throw ConfigError("logging.level: \"" + config.level + "\" is not a log level; use one of " +
                      std::string(detail::log_level_names));
  }

  // Two services made at once must not both create "dlock": spdlog refuses
  // a second logger of the same name.
  static std::mutex creating;
  std::shared_ptr<spdlog::logger> logger;
  {
    const std::lock_guard<std::mutex> hold(creating);
    logger = spdlog::get("dlock");
    if (!logger) {
      try {
        logger = spdlog::stderr_color_mt("dlock");
      } catch (const spdlog::spdlog_ex&) {
        // Registered meanwhile by code that does not take our mutex.
        logger = spdlog::get("dlock");
        if (!logger) throw;
      }
    }
  }
  logger->set_level(*level);
  return logger;
}

}  // namespace dlock
