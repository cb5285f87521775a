// The cluster executor's life (slot map, subscriber, fork) and what is per master
// rather than per slot: SCRIPT LOAD everywhere, the scripts kept for NOSCRIPT, for_each_master.

#include "dlock/cluster_executor.hpp"

#include <optional>
#include <utility>

#include "cluster/cluster_dispatch.hpp"
#include "cluster/cluster_topology.hpp"
#include "config/node_config.hpp"
#include "connection/master_watch.hpp"
#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"
#include "dlock/subscriber.hpp"
#include "cluster/hash_slot.hpp"

namespace dlock {
namespace {

// One master of the cluster as an executor of its own, for what is per
// server (SCAN): no routing, no redirections followed.
class MasterExecutor final : public RedisExecutor {
 public:
  explicit MasterExecutor(Node& node) : node_(node) {}
  RedisReply command(const RedisCommand& argv) override { return node_.pool.borrow()->command(argv); }
  std::vector<RedisReply> pipeline(const std::vector<RedisCommand>& commands) override {
    return node_.pool.borrow()->pipeline(commands);
  }
  Subscription subscribe(const std::string& channel, MessageHandler, std::optional<Millis>) override {
    throw InvalidArgument("redis " + node_.name + ": cannot subscribe to '" + channel +
                          "' through one master; subscribe through the cluster's executor");
  }
  std::string endpoint() const override { return node_.name; }

 private:
  Node& node_;
};

}  // namespace

ClusterExecutor::ClusterExecutor(RedisConfig config)
    : config_(std::move(config)),
      topology_(std::make_unique<detail::ClusterTopology>(config_)),
      generation_(detail::fork_generation()) {
  RedisConfig subscriber_config = config_;
  subscriber_config.endpoint_source = topology_->subscriber_source();
  subscriber_ = std::make_unique<detail::Subscriber>(std::move(subscriber_config));
  watch_ = std::make_unique<detail::MasterWatch>(detail::MasterWatch::Masters{
      .list =
          [this] {
            std::vector<detail::WatchedMaster> masters;
            for (Node* node : topology_->masters()) {
              masters.push_back({node->name, detail::node_config(config_, node->address)});
            }
            return masters;
          },
      .look_again = [this] { topology_->refresh(topology_->version(), Clock::now() + config_.command_timeout); }});
}

ClusterExecutor::~ClusterExecutor() {
  // In a fork child the subscriber's thread does not exist: see HiredisExecutor.
  if (forked()) (void)subscriber_.release();
}

bool ClusterExecutor::forked() const { return generation_ != detail::fork_generation(); }

void ClusterExecutor::connect() {
  topology_->discover();
  detail::check_pong(command({"PING"}), endpoint(), "redis.cluster.nodes name nodes of a usable Redis Cluster");
}

RedisReply ClusterExecutor::to_every_master(const RedisCommand& argv, bool urgent, Clock::time_point deadline) {
  std::vector<Node*> masters = topology_->masters();
  std::optional<RedisReply> answer;
  std::string failure = "redis " + endpoint() + ": no master known";
  for (Node* node : masters) {
    try {
      RedisReply reply = urgent ? node->urgent.pipeline({argv}, deadline).at(0) : node->pool.borrow()->command(argv);
      if (reply.is_error()) return reply;  // a refusal (an ACL's) is the same on every master
      if (!answer) answer = std::move(reply);
      if (argv.size() == 3 && reply_is_sha(*answer)) remember_script(answer->str, argv[2]);
    } catch (const ConnectionError& e) {
      // A master down (failing over) is skipped: its successor is asked once the map knows it.
      failure = e.what();
    }
  }
  if (answer) return std::move(*answer);
  throw ConnectionError(failure + "; no master of " + endpoint() + " answered " + argv.front());
}

void ClusterExecutor::remember_script(const std::string& sha, const std::string& source) {
  std::lock_guard guard(scripts_mutex_);
  scripts_.try_emplace(sha, source);
}

std::optional<std::string> ClusterExecutor::script_source(std::string_view sha) const {
  std::lock_guard guard(scripts_mutex_);
  const auto found = scripts_.find(sha);
  if (found == scripts_.end()) return std::nullopt;
  return found->second;
}

Subscription ClusterExecutor::subscribe(const std::string& channel, MessageHandler on_message,
                                        std::optional<std::chrono::milliseconds> confirm_within) {
  if (forked()) {
    detail::refuse_subscribing_after_fork(endpoint(), channel);
  }
  return subscriber_->subscribe(channel, std::move(on_message), confirm_within);
}

std::string ClusterExecutor::endpoint() const { return topology_->description(); }

std::uint32_t ClusterExecutor::script_group(std::string_view key) const { return detail::key_slot(key); }

Subscription ClusterExecutor::watch_resets(ResetHandler on_reset) { return watch_->watch(std::move(on_reset)); }

void ClusterExecutor::for_each_master(const std::function<void(RedisExecutor& master)>& visit) {
  std::vector<Node*> masters = topology_->masters();
  if (masters.empty()) {
    topology_->refresh(topology_->version(), Clock::now() + config_.command_timeout);
    masters = topology_->masters();
  }
  if (masters.empty()) throw ConnectionError("redis " + endpoint() + ": no master known; is the cluster up?");
  for (Node* node : masters) {
    MasterExecutor master(*node);
    visit(master);
  }
}

}  // namespace dlock
