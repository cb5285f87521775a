// resolve_config: --config FILE, else $DLOCK_CONFIG, else the built-in defaults with the
// DLOCK_REDIS_* overrides; the same choice for every subcommand.
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

Config resolve_config(const ParsedArgs& parsed) {
  const std::string section = parsed.value("--section").value_or("");
  if (auto file = parsed.value("--config")) return load_config(*file, section);
  if (auto file = environment("DLOCK_CONFIG"); !file.empty()) return load_config(file, section);
  if (!section.empty()) throw UsageError("--section needs a config file: --config FILE or $DLOCK_CONFIG");
  Config config;
  apply_environment_overrides(config);  // as load_config does after a file
  return config;
}

}  // namespace dlock::cli
