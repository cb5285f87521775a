#pragma once
// A throwaway Sentinel deployment on loopback for one test process: a master,
// its replicas (--replicaof) and Sentinels (redis-server --sentinel, each with
// a generated config file), on free ports, torn down when the object goes.
// The constructor returns once every Sentinel knows every replica and every
// other Sentinel, so a failover can start at once. Failovers move the master
// among the servers; master() always asks the Sentinels which one it is now.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "redis_server.hpp"

namespace dlock::test {

class SentinelTopology {
 public:
  struct Options {
    int replicas = 2;
    int sentinels = 3;
    std::string master_name = "mymaster";
    std::string sentinel_password;  // the Sentinels' own requirepass; empty = none
    std::chrono::milliseconds down_after{1000};  // a silent master counts as down after this
    std::chrono::milliseconds failover_timeout{3000};
    // Every server and Sentinel speaks TLS only (ServerTls), replication and
    // the Sentinels' own links included; config() turns TLS on.
    bool tls = false;
  };

  explicit SentinelTopology(Options options);
  SentinelTopology() : SentinelTopology(Options{}) {}
  ~SentinelTopology();
  SentinelTopology(const SentinelTopology&) = delete;
  SentinelTopology& operator=(const SentinelTopology&) = delete;

  // The master as the first Sentinel that answers names it.
  NodeAddress master_address() const;
  // The server at master_address().
  RedisServer& master();
  // Every Redis server (master and replicas, whatever their roles are now).
  const std::vector<std::unique_ptr<RedisServer>>& servers() const { return servers_; }
  const std::vector<std::unique_ptr<RedisServer>>& sentinels() const { return sentinels_; }

  // SIGKILLs the current master and returns it (still stopped; start() it to
  // bring it back: it comes up empty, as a master, until the Sentinels make
  // it a replica of the new one).
  RedisServer& kill_master();
  // SENTINEL FAILOVER: a graceful switch; the old master becomes a replica.
  void failover();
  // Waits until every Sentinel names a master other than `old_master` and it
  // answers ROLE as a master. False if that did not happen within `timeout`.
  bool await_new_master(const NodeAddress& old_master, std::chrono::milliseconds timeout = std::chrono::seconds(20));

  // redis.mode: sentinel, pointing at the Sentinels, with short timeouts.
  Config config() const;

  // Runs a command on a Sentinel (with its password), rendered as RedisServer::run does.
  std::string ask_sentinel(std::size_t index, const std::vector<std::string>& argv) const;

 private:
  bool sentinels_agree(int replicas, int other_sentinels) const;

  Options options_;
  std::vector<std::unique_ptr<RedisServer>> servers_;    // [0] is the first master
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

}  // namespace dlock::test
