// DLOCK_REDIS_HOST, DLOCK_REDIS_PORT and DLOCK_REDIS_PASSWORD: one reading of
// them, whether a config file was read first or not.

#include <cstdlib>
#include <string>
#include <string_view>

#include "config/config_validation.hpp"
#include "dlock/config.hpp"
#include "dlock/errors.hpp"

namespace dlock {
namespace {

// An empty variable counts as unset, so an exported-but-blank one cannot wipe a value.
std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// Digits only: a sign, blank or anything else is refused rather than read
// one way here and another way by some other tool of the deployment.
int port_from(const std::string& text) {
  const std::string where = "environment variable DLOCK_REDIS_PORT (overrides redis.port): ";
  if (text.find_first_not_of("0123456789") != std::string::npos) {
    throw ConfigError(where + "expected a port number, got \"" + text +
                      "\"; write only digits (no sign or spaces), 1..65535, or unset it");
  }
  try {
    return static_cast<int>(detail::parse_integer(text, detail::min_port, detail::max_port, "a port number"));
  } catch (const detail::InvalidValue& e) {
    throw ConfigError(where + e.what() + "; fix or unset it");
  }
}

}  // namespace

void apply_environment_overrides(Config& config) {
  if (const auto host = variable("DLOCK_REDIS_HOST"); !host.empty()) config.redis.host = host;
  if (const auto port = variable("DLOCK_REDIS_PORT"); !port.empty()) config.redis.port = port_from(port);
  if (const auto password = variable("DLOCK_REDIS_PASSWORD"); !password.empty()) config.redis.password = password;
}

}  // namespace dlock
