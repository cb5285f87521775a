// The warning for redis.tls.verify: false, logged once per process for each server and name.
#include "tls/tls_warning.hpp"

#include <mutex>
#include <set>
#include <string>

namespace dlock::detail {

void warn_if_unverified(const RedisConfig& config, spdlog::logger& logger) {
  if (!config.tls.enabled || config.tls.verify) return;
  const std::string endpoint = to_string(NodeAddress{config.host, config.port});
  static std::mutex mutex;
  static std::set<std::string> warned;  // guarded by mutex
  {
    std::lock_guard lock(mutex);
    if (!warned.insert(endpoint + " " + config.tls.server_name).second) return;
  }
  logger.warn(
      "redis {}: redis.tls.verify is false: the server's certificate and name are not checked, so anyone on the "
      "network path can pose as the server and read every command; set redis.tls.ca_file and remove verify: false",
      endpoint);
}

}  // namespace dlock::detail
