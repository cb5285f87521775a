#pragma once
// The whole configuration of a dlock service, as read from YAML by load_config.

#include <cstddef>
#include <filesystem>
#include <string>

#include "dlock/lock_options.hpp"

namespace dlock {

// Config section `redis:`.
struct RedisConfig {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string username;  // Redis 6 ACL user; empty = the default user
  std::string password;  // empty = no AUTH
  int database = 0;
  Millis connect_timeout{1000};
  Millis command_timeout{1000};
  std::size_t pool_size = 8;
};

// Config section `logging:`.
struct LoggingConfig {
  std::string level = "info";  // trace|debug|info|warn|error|off
};

struct Config {
  RedisConfig redis;
  LockConfig lock;
  LoggingConfig logging;
};

// Reads a YAML file as documented in config/dlock.example.yaml: ${VAR} and
// ${VAR:-default} are expanded in values, then DLOCK_REDIS_HOST,
// DLOCK_REDIS_PORT and DLOCK_REDIS_PASSWORD override the file. Every setting
// is optional. Throws ConfigError ("FILE:LINE: setting: what is wrong; what to
// do") for a missing or unreadable file, malformed YAML, an unknown key, a
// wrong type, an out-of-range value or an unset ${VAR}.
Config load_config(const std::filesystem::path& yaml);

// Applies DLOCK_REDIS_HOST, DLOCK_REDIS_PORT and DLOCK_REDIS_PASSWORD to
// `config`, each when set and not empty (load_config calls it after reading
// the file; call it yourself for a Config built without one). The port must
// be plain digits 1..65535, no sign. Throws ConfigError naming the variable.
void apply_environment_overrides(Config& config);

}  // namespace dlock
