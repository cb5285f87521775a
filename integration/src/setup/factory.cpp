// make_executor and make_lock_service: the executor redis.mode asks for, connected at once,
// and the cross-setting checks the YAML loader makes, repeated for a Config built in code.
#include "dlock/factory.hpp"

#include <spdlog/spdlog.h>

#include "dlock/cluster_executor.hpp"

#include "dlock/errors.hpp"
#include "dlock/hiredis_executor.hpp"
#include "dlock/logging.hpp"
#include "dlock/redlock_executor.hpp"
#include "dlock/sentinel_executor.hpp"
#include "tls/tls_warning.hpp"

namespace dlock {

std::shared_ptr<RedisExecutor> make_executor(const RedisConfig& config, bool connect,
                                             std::shared_ptr<spdlog::logger> logger) {
  if (config.tls.enabled && !config.tls.verify) {
    if (!logger) logger = spdlog::get("dlock");
    if (!logger) logger = make_logger(LoggingConfig{});
    detail::warn_if_unverified(config, *logger);
  }
  switch (config.mode) {
    case RedisMode::standalone: {
      auto executor = std::make_shared<HiredisExecutor>(config);
      if (connect) executor->connect();
      return executor;
    }
    case RedisMode::sentinel: {
      auto executor = std::make_shared<SentinelExecutor>(config);
      if (connect) executor->connect();
      return executor;
    }
    case RedisMode::cluster: {
      auto executor = std::make_shared<ClusterExecutor>(config);
      if (connect) executor->connect();
      return executor;
    }
    case RedisMode::redlock: {
      auto executor = std::make_shared<RedlockExecutor>(config);
      if (connect) executor->connect();
      return executor;
    }
    default:
      throw ConfigError(std::string("redis.mode: ") + mode_name(config.mode) + " is not built yet");
  }
}

std::shared_ptr<RedisLockService> make_lock_service(const Config& config, std::shared_ptr<spdlog::logger> logger) {
  // As the YAML loader checks: a WAIT that outlasts the read breaks its
  // connection, and a grant that meets it is never given back.
  if (config.lock.replica_acks > 0 && config.lock.replica_ack_timeout >= config.redis.command_timeout) {
    throw InvalidArgument("lock.replica_ack_timeout_ms: " + std::to_string(config.lock.replica_ack_timeout.count()) +
                          " ms must be shorter than redis.command_timeout_ms (" +
                          std::to_string(config.redis.command_timeout.count()) +
                          " ms): a WAIT that outlasts the command timeout breaks its connection");
  }
  if (config.redis.mode == RedisMode::redlock && config.lock.replica_acks > 0) {
    throw InvalidArgument("lock.replica_acks must be 0 when redis.mode is redlock: a Redlock's lock is had when a "
                          "majority of its independent masters grant it, not when replicas copy it");
  }
  const Millis delay = config.redis.redlock.restarted_node_delay;
  if (config.redis.mode == RedisMode::redlock && delay > Millis(0) && delay < config.lock.watchdog_timeout) {
    throw InvalidArgument("redis.redlock.restarted_node_delay_ms: " + std::to_string(delay.count()) +
                          " ms is shorter than lock.watchdog_timeout_ms (" +
                          std::to_string(config.lock.watchdog_timeout.count()) +
                          " ms): a restarted node must sit out at least the longest lease; raise it, or set 0 for "
                          "nodes that persist every write");
  }
  if (config.redis.mode == RedisMode::redlock && config.redis.command_timeout * 3 >= config.lock.watchdog_timeout) {
    throw InvalidArgument("redis.command_timeout_ms: " + std::to_string(config.redis.command_timeout.count()) +
                          " ms must be under a third of lock.watchdog_timeout_ms (" +
                          std::to_string(config.lock.watchdog_timeout.count()) +
                          " ms) in redlock mode: a renewal round waits up to that long for a node that does not "
                          "answer, and the next round must still come before the lease runs out; lower the "
                          "timeout or raise the lease");
  }
  if (!logger) logger = make_logger(config.logging);
  auto executor = make_executor(config.redis, true, logger);
  LockConfig lock = config.lock;
  if (config.redis.mode == RedisMode::redlock) lock.longest_lease = config.redis.redlock.restarted_node_delay;
  auto service = std::make_shared<RedisLockService>(executor, lock, logger);
  logger->debug("dlock service connected to redis {} (prefix '{}', watchdog lease {} ms)", executor->endpoint(),
                config.lock.key_prefix, config.lock.watchdog_timeout.count());
  return service;
}

}  // namespace dlock
