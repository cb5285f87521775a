// Built against an installed dlock, once with find_package and once with
// pkg-config: uses the headers, and links the libraries and their
// dependencies (Config and load_config live in dlock_integration; the
// version comes from the generated header).
#include <iostream>

#include <dlock/dlock.hpp>
#include <dlock/version.hpp>

int main() {
  dlock::Config config;
  config.lock.key_prefix = "consumer:";
  try {
    dlock::load_config("/nonexistent/dlock-consumer.yaml");
  } catch (const dlock::ConfigError&) {
    std::cout << "config_error=caught\n";
  }
  std::cout << "dlock_version=" << dlock::version() << " prefix=" << config.lock.key_prefix << "\n";
  return 0;
}
