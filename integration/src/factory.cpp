#include "dlock/factory.hpp"

#include "dlock/hiredis_executor.hpp"
#include "dlock/logging.hpp"

namespace dlock {

std::shared_ptr<RedisLockService> make_lock_service(const Config& config, std::shared_ptr<spdlog::logger> logger) {
  if (!logger) logger = make_logger(config.logging);
  auto executor = std::make_shared<HiredisExecutor>(config.redis);
  executor->connect();
  auto service = std::make_shared<RedisLockService>(executor, config.lock, logger);
  logger->debug("dlock service connected to redis {} (prefix '{}', watchdog lease {} ms)", executor->endpoint(),
                config.lock.key_prefix, config.lock.watchdog_timeout.count());
  return service;
}

}  // namespace dlock
