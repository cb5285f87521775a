#include "redis_cluster.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

namespace dlock::test {
namespace {

using Reply = std::unique_ptr<redisReply, void (*)(void*)>;

// One command on a fresh connection to 127.0.0.1:port; null reply if it is unreachable.
Reply raw(int port, const std::vector<std::string>& argv) {
  Reply none(nullptr, freeReplyObject);
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, timeval{2, 0});
  if (c == nullptr) return none;
  if (c->err) {
    redisFree(c);
    return none;
  }
  redisSetTimeout(c, timeval{10, 0});
  std::vector<const char*> parts;
  std::vector<size_t> lengths;
  for (const auto& part : argv) {
    parts.push_back(part.data());
    lengths.push_back(part.size());
  }
  void* reply = redisCommandArgv(c, static_cast<int>(parts.size()), parts.data(), lengths.data());
  redisFree(c);
  return Reply(static_cast<redisReply*>(reply), freeReplyObject);
}

std::string text_of(const Reply& reply) {
  if (!reply || reply->str == nullptr) return "";
  return std::string(reply->str, reply->len);
}

// (first slot, last slot, master port) of every range a node reports, sorted; empty if it does not answer.
std::vector<std::tuple<long long, long long, long long>> slot_ranges(int port) {
  std::vector<std::tuple<long long, long long, long long>> ranges;
  const Reply reply = raw(port, {"CLUSTER", "SLOTS"});
  if (!reply || reply->type != REDIS_REPLY_ARRAY) return ranges;
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    if (range->elements < 3 || range->element[2]->elements < 2) continue;
    ranges.emplace_back(range->element[0]->integer, range->element[1]->integer, range->element[2]->element[1]->integer);
  }
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

}  // namespace

RedisCluster::RedisCluster(int masters, int replicas, int node_timeout_ms) {
  const int count = masters * (1 + replicas);
  for (int i = 0; i < count; ++i) {
    nodes_.push_back(std::make_unique<RedisServer>(std::vector<std::string>{
        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout",
        std::to_string(node_timeout_ms),
        // A replica takes over however long it was cut off from its master: tests kill masters on purpose.
        "--cluster-replica-validity-factor", "0",
        // The other masters go on serving while one is failed over (docs/deployments.md recommends it).
        "--cluster-require-full-coverage", "no"}));
  }
  std::string create = "redis-cli --cluster create";
  for (const auto& node : nodes_) create += " 127.0.0.1:" + std::to_string(node->port());
  create += " --cluster-replicas " + std::to_string(replicas) + " --cluster-yes >/dev/null 2>&1";
  if (std::system(create.c_str()) != 0) throw std::runtime_error("redis-cli --cluster create failed: " + create);
  wait_healthy();
}

RedisServer& RedisCluster::node(int port) const {
  for (const auto& node : nodes_) {
    if (node->port() == port && node->running()) return *node;
  }
  throw std::runtime_error("no running cluster node on port " + std::to_string(port));
}

int RedisCluster::master_port(std::uint16_t slot) const {
  for (const auto& node : nodes_) {
    if (!node->running()) continue;
    for (const auto& [first, last, port] : slot_ranges(node->port())) {
      if (first <= slot && slot <= last) return static_cast<int>(port);
    }
  }
  throw std::runtime_error("no master serves slot " + std::to_string(slot));
}

std::vector<int> RedisCluster::master_ports() const {
  std::set<int> ports;
  for (const auto& node : nodes_) {
    if (!node->running()) continue;
    for (const auto& range : slot_ranges(node->port())) ports.insert(static_cast<int>(std::get<2>(range)));
    break;
  }
  return {ports.begin(), ports.end()};
}

int RedisCluster::replica_port(int master_port) const {
  for (const auto& node : nodes_) {
    if (!node->running()) continue;
    const Reply role = raw(node->port(), {"ROLE"});
    if (!role || role->type != REDIS_REPLY_ARRAY || role->elements < 3) continue;
    if (role->element[0]->str != nullptr && std::string(role->element[0]->str) == "slave" &&
        role->element[2]->integer == master_port) {
      return node->port();
    }
  }
  throw std::runtime_error("no running replica of the master on port " + std::to_string(master_port));
}

void RedisCluster::wait_healthy(int timeout_ms) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    bool healthy = true;
    std::vector<std::tuple<long long, long long, long long>> agreed;
    bool first = true;
    for (const auto& node : nodes_) {
      if (!node->running()) continue;
      if (text_of(raw(node->port(), {"CLUSTER", "INFO"})).find("cluster_state:ok") == std::string::npos) {
        healthy = false;
        break;
      }
      auto ranges = slot_ranges(node->port());
      if (first) {
        agreed = std::move(ranges);
        first = false;
      } else if (ranges != agreed) {
        healthy = false;
        break;
      }
    }
    if (healthy && !agreed.empty()) return;
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("the test cluster did not become healthy within " + std::to_string(timeout_ms) +
                               " ms:\n" + describe());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string RedisCluster::describe() const {
  std::string text;
  for (const auto& node : nodes_) {
    text += "node " + std::to_string(node->port()) + ":";
    if (!node->running()) {
      text += " not running\n";
      continue;
    }
    const std::string info = text_of(raw(node->port(), {"CLUSTER", "INFO"}));
    const auto state = info.find("cluster_state:");
    text += " " + (state == std::string::npos ? std::string("no answer") : info.substr(state, info.find('\r', state) - state));
    text += ", slots";
    for (const auto& [first, last, master] : slot_ranges(node->port())) {
      text += " " + std::to_string(first) + "-" + std::to_string(last) + "@" + std::to_string(master);
    }
    text += "\n" + text_of(raw(node->port(), {"CLUSTER", "NODES"})) + node->log_tail(8);
  }
  return text;
}

std::string RedisCluster::node_id(int port) const { return text_of(raw(port, {"CLUSTER", "MYID"})); }

void RedisCluster::migrate_slot(std::uint16_t slot, int to_port, const std::function<void()>& between) const {
  const int from_port = master_port(slot);
  if (from_port == to_port) return;
  const std::string slot_text = std::to_string(slot);
  const std::string from_id = node_id(from_port), to_id = node_id(to_port);
  const auto must = [](const Reply& reply, const std::string& what) {
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
      throw std::runtime_error(what + " failed: " + (reply ? text_of(reply) : std::string("no reply")));
    }
  };
  must(raw(to_port, {"CLUSTER", "SETSLOT", slot_text, "IMPORTING", from_id}), "SETSLOT IMPORTING");
  must(raw(from_port, {"CLUSTER", "SETSLOT", slot_text, "MIGRATING", to_id}), "SETSLOT MIGRATING");
  // Moves up to `batch` keys; returns how many were left to move before.
  const auto move_keys = [&](std::size_t batch) {
    const Reply keys = raw(from_port, {"CLUSTER", "GETKEYSINSLOT", slot_text, "1000"});
    must(keys, "GETKEYSINSLOT");
    if (keys->elements == 0 || batch == 0) return static_cast<std::size_t>(keys->elements);
    std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(to_port), "", "0", "5000", "KEYS"};
    for (size_t i = 0; i < keys->elements && i < batch; ++i) migrate.emplace_back(keys->element[i]->str, keys->element[i]->len);
    must(raw(from_port, migrate), "MIGRATE");
    return static_cast<std::size_t>(keys->elements);
  };
  const std::size_t total = move_keys(0);
  move_keys(std::max<std::size_t>(1, total / 2));
  if (between) between();
  while (move_keys(1000) > 0) {
  }
  // The new owner first, then the old one (which stops answering ASK), then everyone else.
  must(raw(to_port, {"CLUSTER", "SETSLOT", slot_text, "NODE", to_id}), "SETSLOT NODE (target)");
  must(raw(from_port, {"CLUSTER", "SETSLOT", slot_text, "NODE", to_id}), "SETSLOT NODE (source)");
  for (const int port : master_ports()) {
    if (port != to_port && port != from_port) raw(port, {"CLUSTER", "SETSLOT", slot_text, "NODE", to_id});
  }
}

Config RedisCluster::config() const {
  Config config = nodes_.front()->config();  // the same short timeouts as one server's
  config.redis.mode = RedisMode::cluster;
  for (const auto& node : nodes_) config.redis.cluster.nodes.push_back(NodeAddress{"127.0.0.1", node->port()});
  return config;
}

}  // namespace dlock::test
