// libFuzzer target over the YAML config loader: any bytes written to a file
// and read by dlock::load_config (whole, or its `dlock:` section), or given to
// dlock::parse_config, must end in a Config or a dlock::ConfigError.
// Any other exception escapes and is reported by libFuzzer as a crash, as are
// sanitizer findings, timeouts (hangs) and leaks. Built by fuzz/run.sh.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "dlock/config.hpp"
#include "dlock/errors.hpp"

namespace {

// Where each input is written for load_config; removed when the fuzzer exits (at its time limit).
struct InputFile {
  std::string path;
  ~InputFile() { std::remove(path.c_str()); }
};

const std::string& input_path() {
  static const InputFile file{[] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/dlock-config-fuzz-" + std::to_string(::getpid()) + ".yaml";
  }()};
  return file.path;
}

// A loaded config must hold values inside the documented ranges.
void check_ranges(const dlock::Config& config) {
  if (config.redis.port < 1 || config.redis.port > 65535 || config.redis.pool_size < 1 ||
      config.lock.key_prefix.empty() || config.lock.max_key_bytes < 1 || config.lock.watchdog_timeout.count() <= 0 ||
      config.lock.wait.count() < 0) {
    std::abort();
  }
  // Redlock: a majority over distinct nodes, and no restarted node trusted before the longest lease ran out.
  const auto& redlock = config.redis.redlock;
  if (config.redis.mode == dlock::RedisMode::redlock &&
      (redlock.nodes.size() < 3 || redlock.nodes.size() > 15 || redlock.nodes.size() % 2 == 0 ||
       redlock.restarted_node_delay.count() < 0 ||
       (redlock.restarted_node_delay.count() > 0 && redlock.restarted_node_delay < config.lock.watchdog_timeout) ||
       config.lock.replica_acks != 0)) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The loader lets these override the file; the fuzzer tests the file alone.
  ::unsetenv("DLOCK_REDIS_HOST");
  ::unsetenv("DLOCK_REDIS_PORT");
  ::unsetenv("DLOCK_REDIS_PASSWORD");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = input_path();
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, file) != size) std::abort();
  std::fclose(file);
  // The whole file, and the `dlock:` section of a service's own file.
  for (const char* section : {"", "dlock"}) {
    try {
      check_ranges(dlock::load_config(path, section));
    } catch (const dlock::ConfigError&) {
    }
  }
  try {
    check_ranges(dlock::parse_config(std::string(reinterpret_cast<const char*>(data), size), "fuzz", "services.dlock"));
  } catch (const dlock::ConfigError&) {
  }
  return 0;
}
