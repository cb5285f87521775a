#include "sentinel_topology.hpp"

#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dlock::test {
namespace {

using Clock = std::chrono::steady_clock;

bool wait_for(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

// How many entries SENTINEL REPLICAS / SENTINELS listed: each is a flat array
// of field/value pairs rendered space-separated, so their "name" fields count them.
int count_entries(const std::string& rendered) {
  std::istringstream words(rendered);
  int count = 0;
  for (std::string word; words >> word;) count += word == "name";
  return count;
}

std::string sentinel_config(const SentinelTopology::Options& options, int master_port) {
  const std::string name = options.master_name;
  std::string text = "sentinel monitor " + name + " 127.0.0.1 " + std::to_string(master_port) + " " +
                     std::to_string(options.sentinels / 2 + 1) + "\n" + "sentinel down-after-milliseconds " + name +
                     " " + std::to_string(options.down_after.count()) + "\n" + "sentinel failover-timeout " + name +
                     " " + std::to_string(options.failover_timeout.count()) + "\n" + "sentinel parallel-syncs " +
                     name + " 1\n";
  if (!options.sentinel_password.empty()) {
    text += "requirepass \"" + options.sentinel_password + "\"\nsentinel sentinel-pass \"" +
            options.sentinel_password + "\"\n";
  }
  return text;
}

}  // namespace

SentinelTopology::SentinelTopology(Options options) : options_(std::move(options)) {
  // Over TLS, a replica and a Sentinel are TLS clients too: they verify the
  // servers they dial with ca.pem, which signed every server's certificate.
  const std::optional<ServerTls> tls = options_.tls ? std::optional<ServerTls>(ServerTls{}) : std::nullopt;
  std::vector<std::string> tls_client_args;
  if (options_.tls) {
    tls_client_args = {"--tls-replication", "yes", "--tls-ca-cert-file", (test_certificates() / "ca.pem").string()};
  }
  const auto with_tls_client = [&](std::vector<std::string> args) {
    args.insert(args.end(), tls_client_args.begin(), tls_client_args.end());
    return args;
  };
  servers_.push_back(std::make_unique<RedisServer>(with_tls_client({}), tls));
  const std::string master_port = std::to_string(servers_[0]->port());
  for (int i = 0; i < options_.replicas; ++i) {
    servers_.push_back(
        std::make_unique<RedisServer>(with_tls_client({"--replicaof", "127.0.0.1", master_port}), tls));
  }
  // Sentinels learn the replicas from the master's INFO, which they read at
  // once and then only every 10 s: the replicas must be attached first.
  const bool attached = wait_for(
      [&] {
        const std::string info = servers_[0]->run({"INFO", "replication"});
        return info.find("connected_slaves:" + std::to_string(options_.replicas)) != std::string::npos;
      },
      std::chrono::seconds(10));
  if (!attached) throw std::runtime_error("sentinel fixture: the replicas did not attach to the master");
  const std::string config_text = sentinel_config(options_, servers_[0]->port());
  for (int i = 0; i < options_.sentinels; ++i) {
    sentinels_.push_back(std::make_unique<RedisServer>(with_tls_client({"--sentinel"}), config_text, tls));
  }
  // A password-protected Sentinel is not asked (run() sends no AUTH); such a
  // deployment is only for start-up checks, which need no agreement.
  if (!options_.sentinel_password.empty()) return;
  // Sentinels find each other through hello messages every 2 s.
  if (!wait_for([&] { return sentinels_agree(options_.replicas, options_.sentinels - 1); }, std::chrono::seconds(20))) {
    throw std::runtime_error("sentinel fixture: the Sentinels did not learn the replicas and each other in time");
  }
}

SentinelTopology::~SentinelTopology() {
  // Sentinels first, so none starts a failover while the servers stop.
  sentinels_.clear();
  servers_.clear();
}

bool SentinelTopology::sentinels_agree(int replicas, int other_sentinels) const {
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    if (count_entries(ask_sentinel(i, {"SENTINEL", "REPLICAS", options_.master_name})) < replicas) return false;
    if (count_entries(ask_sentinel(i, {"SENTINEL", "SENTINELS", options_.master_name})) < other_sentinels) {
      return false;
    }
  }
  return true;
}

std::string SentinelTopology::ask_sentinel(std::size_t index, const std::vector<std::string>& argv) const {
  return sentinels_.at(index)->run(argv);
}

NodeAddress SentinelTopology::master_address() const {
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    if (!sentinels_[i]->running()) continue;
    const std::string answer = ask_sentinel(i, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
    const auto space = answer.find(' ');
    if (space == std::string::npos) continue;
    return NodeAddress{answer.substr(0, space), std::stoi(answer.substr(space + 1))};
  }
  throw std::runtime_error("sentinel fixture: no Sentinel names a master");
}

RedisServer& SentinelTopology::master() {
  const NodeAddress address = master_address();
  for (auto& server : servers_) {
    if (server->port() == address.port) return *server;
  }
  throw std::runtime_error("sentinel fixture: the Sentinels name " + to_string(address) + ", none of its servers");
}

RedisServer& SentinelTopology::kill_master() {
  RedisServer& old = master();
  old.kill();
  return old;
}

void SentinelTopology::failover() {
  const std::string answer = ask_sentinel(0, {"SENTINEL", "FAILOVER", options_.master_name});
  if (answer != "OK") throw std::runtime_error("sentinel fixture: SENTINEL FAILOVER answered " + answer);
}

bool SentinelTopology::await_new_master(const NodeAddress& old_master, std::chrono::milliseconds timeout) {
  return wait_for(
      [&] {
        for (std::size_t i = 0; i < sentinels_.size(); ++i) {
          const std::string answer = ask_sentinel(i, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
          if (answer.empty() || answer == "127.0.0.1 " + std::to_string(old_master.port)) return false;
        }
        const std::string role = master().run({"ROLE"});
        return role.starts_with("master");
      },
      timeout);
}

Config SentinelTopology::config() const {
  Config config = servers_[0]->config();
  config.redis.mode = RedisMode::sentinel;
  config.redis.sentinel.master_name = options_.master_name;
  config.redis.sentinel.password = options_.sentinel_password;
  config.redis.sentinel.nodes.clear();
  for (const auto& sentinel : sentinels_) config.redis.sentinel.nodes.push_back({sentinel->host(), sentinel->port()});
  return config;
}

}  // namespace dlock::test
