#pragma once
// N independent redis-servers on loopback, and a config that makes them one
// Redlock (redis.mode: redlock). A node may be paused, killed and restarted
// (RedisServer's own controls) to take it out of the majority.

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "redis_server.hpp"

namespace dlock::test {

class RedlockNodes {
 public:
  explicit RedlockNodes(std::size_t count = 5) {
    for (std::size_t i = 0; i < count; ++i) servers_.push_back(std::make_unique<RedisServer>());
  }

  RedisServer& operator[](std::size_t i) { return *servers_.at(i); }
  std::size_t size() const { return servers_.size(); }

  // Short node timeouts, so that a paused node costs a call little. Fresh
  // servers have just started: unless `restarted_node_delay` is 0 they sit
  // out that long before their grants count.
  Config config(std::chrono::milliseconds restarted_node_delay = std::chrono::milliseconds(0)) const {
    Config config = servers_.front()->config();
    config.redis.mode = RedisMode::redlock;
    config.redis.command_timeout = std::chrono::milliseconds(400);
    config.redis.connect_timeout = std::chrono::milliseconds(400);
    config.redis.redlock.restarted_node_delay = restarted_node_delay;
    for (const auto& server : servers_) config.redis.redlock.nodes.push_back({server->host(), server->port()});
    return config;
  }

  // What `argv` answers on every node, in the nodes' order (a stopped node: "down").
  std::vector<std::string> run_everywhere(const std::vector<std::string>& argv) const {
    std::vector<std::string> replies;
    for (const auto& server : servers_) replies.push_back(server->running() ? server->run(argv) : "down");
    return replies;
  }

 private:
  std::vector<std::unique_ptr<RedisServer>> servers_;
};

// How many nodes hold `key`'s lock (a hash with an owner in it).
inline int nodes_holding(const RedlockNodes& nodes, const std::string& key) {
  int holding = 0;
  for (const std::string& reply : nodes.run_everywhere({"EXISTS", "dlock:{" + key + "}"})) holding += reply == "1";
  return holding;
}

// Threads of two services taking `key` in turn until stopped, each noting
// whether anyone else was inside while it held the lock: an overlap means two
// holders at once. Errors (a wait run out while nodes are paused) are passed over.
class ExclusionWorkers {
 public:
  ExclusionWorkers(RedisLockService& first, RedisLockService& second, const std::string& key, LockOptions options,
                   int threads = 4) {
    for (int t = 0; t < threads; ++t) {
      workers_.emplace_back([this, &service = t % 2 == 0 ? first : second, key, options] {
        while (!stop_) {
          try {
            auto guard = service.lock(key, options);
            if (inside_.fetch_add(1) != 0) overlapped_ = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(4));
            inside_.fetch_sub(1);
            ++cycles_;
          } catch (const Error&) {
          }
        }
      });
    }
  }
  ~ExclusionWorkers() { finish(); }
  void finish() {
    stop_ = true;
    for (auto& worker : workers_) {
      if (worker.joinable()) worker.join();
    }
  }
  bool overlapped() const { return overlapped_.load(); }
  int cycles() const { return cycles_.load(); }

 private:
  std::atomic<int> inside_{0};
  std::atomic<bool> overlapped_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> cycles_{0};
  std::vector<std::thread> workers_;
};

}  // namespace dlock::test
