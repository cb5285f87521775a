#pragma once
// A throwaway Redis Cluster for tests and the benchmark: N redis-servers
// started with cluster-enabled on free loopback ports (each a RedisServer,
// with its own temporary directory), joined by `redis-cli --cluster create`,
// ready once every node reports cluster_state:ok. Stopped with the object.
// Starting one costs a few seconds: share one per test process.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "redis_server.hpp"

namespace dlock::test {

class RedisCluster {
 public:
  // `masters` masters, each with `replicas` replicas. node_timeout_ms is the
  // cluster's cluster-node-timeout: how soon a dead master is failed over.
  // 2 s: under a CI's load (compilers beside the tests) a node's answer to a
  // gossip ping can be a second late, and a 1 s timeout could fail it over mid-test.
  RedisCluster(int masters, int replicas, int node_timeout_ms = 2000);
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // Every node, masters and replicas, in the order they were started.
  const std::vector<std::unique_ptr<RedisServer>>& nodes() const { return nodes_; }
  // The running node on `port`; throws if none.
  RedisServer& node(int port) const;
  // The port of the master serving `slot`, as the running nodes say.
  int master_port(std::uint16_t slot) const;
  // The ports of the running masters.
  std::vector<int> master_ports() const;
  // The port of a running replica of the master on `master_port`.
  int replica_port(int master_port) const;

  // Waits until every running node says cluster_state:ok and agrees on the
  // master of every slot; throws after `timeout_ms`.
  void wait_healthy(int timeout_ms = 20000) const;
  // Every node's state, slot map, view of the others and last log lines: what a failed wait shows.
  std::string describe() const;
  // Moves `slot` with its keys from its master to the master on `to_port`,
  // the way redis-cli's resharding does (SETSLOT IMPORTING/MIGRATING, MIGRATE
  // in batches, SETSLOT NODE everywhere). `between` runs after the slot is
  // marked migrating and half its keys have moved: a test acts mid-migration there.
  void migrate_slot(std::uint16_t slot, int to_port, const std::function<void()>& between = {}) const;

  // A Config for redis.mode: cluster with every node as a seed, short timeouts.
  Config config() const;

 private:
  std::string node_id(int port) const;

  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace dlock::test
