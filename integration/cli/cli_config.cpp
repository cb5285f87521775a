#include "cli_config.hpp"

#include <cstdlib>

#include "dlock/errors.hpp"

namespace dlock::cli {

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

Config resolve_config(const std::optional<std::string>& config_flag) {
  if (config_flag) return load_config(*config_flag);
  if (auto file = environment("DLOCK_CONFIG"); !file.empty()) return load_config(file);
  Config config;
  apply_environment_overrides(config);  // as load_config does after a file
  return config;
}

}  // namespace dlock::cli
