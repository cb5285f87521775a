#pragma once
// The one throwaway Redis Cluster a test process shares (3 masters, 1 replica
// each: starting one costs seconds, so its cases run in order on it), a lock
// service on it, and the hash slot of a lock's key.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "dlock/dlock.hpp"
#include "redis_cluster.hpp"

namespace dlock::test {

inline RedisCluster& cluster() {
  static RedisCluster shared(3, 1);
  return shared;
}

// A service on cluster() whose watchdog lease is `lease`.
inline std::shared_ptr<RedisLockService> cluster_service(Millis lease = std::chrono::seconds(30)) {
  Config config = cluster().config();
  config.lock.watchdog_timeout = lease;
  return make_lock_service(config);
}

// The slot of `key`'s lock (default prefix).
inline std::uint16_t slot_of(const std::string& key) {
  ClusterExecutor executor(cluster().config().redis);
  return static_cast<std::uint16_t>(executor.script_group("dlock:{" + key + "}"));
}

}  // namespace dlock::test
