#include "cli_config.hpp"

#include <charconv>
#include <cstdlib>

#include "dlock/errors.hpp"

namespace dlock::cli {

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// The same overrides load_config applies after reading a file, for the case
// where there is no file at all.
void apply_environment_overrides(Config& config) {
  if (auto host = environment("DLOCK_REDIS_HOST"); !host.empty()) config.redis.host = host;
  if (auto text = environment("DLOCK_REDIS_PORT"); !text.empty()) {
    int port = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), port);
    if (error != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535) {
      throw ConfigError("environment variable DLOCK_REDIS_PORT (overrides redis.port): '" + text +
                        "' is not a port number 1..65535; fix or unset it");
    }
    config.redis.port = port;
  }
  if (auto password = environment("DLOCK_REDIS_PASSWORD"); !password.empty()) config.redis.password = password;
}

}  // namespace

Config resolve_config(const std::optional<std::string>& config_flag) {
  if (config_flag) return load_config(*config_flag);
  if (auto file = environment("DLOCK_CONFIG"); !file.empty()) return load_config(file);
  Config config;
  apply_environment_overrides(config);
  return config;
}

}  // namespace dlock::cli
