// The Redlock executor: its nodes made and connected (a majority needed, no server twice by
// run_id), commands sent to every node with the reply a majority gave alike, subscriptions on all.
#include "dlock/redlock_executor.hpp"

#include <algorithm>

#include "dlock/detail/in_parallel.hpp"
#include "dlock/detail/quorum.hpp"
#include "dlock/errors.hpp"
#include "config/config_validation.hpp"
#include "config/node_config.hpp"
#include "connection/master_watch.hpp"

namespace dlock {

namespace {

bool same_reply(const RedisReply& a, const RedisReply& b) {
  if (a.type != b.type || a.integer != b.integer || a.str != b.str || a.elements.size() != b.elements.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.elements.size(); ++i) {
    if (!same_reply(a.elements[i], b.elements[i])) return false;
  }
  return true;
}

// The reply a majority of the nodes gave alike, if any. Not "the reply given
// most often": with one node down and two answering differently, that is
// whichever answered first, and a reader would take one node's word for the
// Redlock's (a lock one restarted node forgot would read as free).
std::optional<RedisReply> majority_given(std::vector<std::optional<RedisReply>>& replies) {
  for (auto& reply : replies) {
    if (!reply) continue;
    std::size_t alike = 0;
    for (const auto& other : replies) alike += other && same_reply(*reply, *other) ? 1 : 0;
    if (alike >= detail::majority_of(replies.size())) return std::move(reply);
  }
  return std::nullopt;
}

std::size_t answered(const std::vector<detail::NodeAnswer>& answers) {
  return static_cast<std::size_t>(
      std::count_if(answers.begin(), answers.end(), [](const detail::NodeAnswer& a) { return a.reply.has_value(); }));
}

}  // namespace

RedlockExecutor::RedlockExecutor(const RedisConfig& config) {
  detail::check_redlock_nodes(config.redlock.nodes);  // as the YAML loader does, for a config built in code
  std::vector<detail::WatchedMaster> watched;
  for (const NodeAddress& node : config.redlock.nodes) {
    nodes_.push_back(std::make_shared<RedlockNode>(detail::node_config(config, node), config.redlock.restarted_node_delay));
    watched.push_back({to_string(node), detail::node_config(config, node)});
  }
  watch_ = std::make_unique<detail::MasterWatch>(
      detail::MasterWatch::Masters{.list = [watched = std::move(watched)] { return watched; }, .look_again = nullptr});
}

RedlockExecutor::~RedlockExecutor() = default;

void RedlockExecutor::connect() {
  const auto failures = detail::in_parallel(nodes_.size(), [this](std::size_t i) { nodes_[i]->connect(); });
  std::vector<detail::NodeAnswer> answers;
  std::size_t connected = 0;
  bool login_refused = false;  // by a node: a setting to fix, whatever else kept the majority away
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    detail::NodeAnswer answer{nodes_[i]->endpoint(), std::nullopt, {}, true};
    if (failures[i]) {
      // A refusal to read the uptime is the user's to fix, not an outage: said at once.
      try {
        std::rethrow_exception(failures[i]);
      } catch (const AuthenticationError& e) {
        answer.failure = e.what();
        login_refused = true;
      } catch (const ConnectionError& e) {
        answer.failure = e.what();
      }
    } else {
      answer.reply = RedisReply{};
      ++connected;
    }
    answers.push_back(std::move(answer));
  }
  // One server under two names (a host name and its address) would vote twice.
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    for (std::size_t j = i + 1; j < nodes_.size(); ++j) {
      const std::string id = nodes_[i]->run_id();
      if (!id.empty() && id == nodes_[j]->run_id()) {
        throw ConfigError("redis.redlock.nodes: " + nodes_[i]->endpoint() + " and " + nodes_[j]->endpoint() +
                          " are the same redis-server (run_id " + id + "); list each independent master once");
      }
    }
  }
  if (connected < detail::majority_of(nodes_.size())) {
    const std::string message = "redlock: cannot reach a majority of the nodes at start-up: " +
                                detail::quorum_summary(answers) + "; check redis.redlock.nodes and that they run";
    if (login_refused) throw AuthenticationError(message);
    throw ConnectionError(message);
  }
}

RedisReply RedlockExecutor::command(const RedisCommand& argv) {
  const std::vector<std::string_view> parts(argv.begin(), argv.end());
  return command_parts(parts);
}

RedisReply RedlockExecutor::command_parts(std::span<const std::string_view> argv) {
  std::vector<detail::NodeAnswer> answers(nodes_.size());
  std::vector<std::unique_ptr<PendingReply>> pending(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    answers[i].endpoint = nodes_[i]->endpoint();
    try {
      pending[i] = nodes_[i]->start(argv);
    } catch (const ConnectionError& e) {
      answers[i].failure = e.what();
    }
  }
  std::vector<std::optional<RedisReply>> replies(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!pending[i]) continue;
    try {
      replies[i] = pending[i]->get();
      answers[i].reply = RedisReply{};
    } catch (const ConnectionError& e) {
      answers[i].failure = e.what();
    }
  }
  const std::string what = argv.empty() ? std::string() : std::string(argv.front());
  if (auto reply = majority_given(replies)) return std::move(*reply);
  throw ConnectionError("redlock: no majority of the nodes gave the same reply to " + what + ": " +
                        detail::quorum_summary(answers) +
                        (answered(answers) >= detail::majority_of(nodes_.size())
                             ? "; they answered differently (commands writing the same keys at once reach the "
                               "nodes in different orders: write shared keys under a lock)"
                             : ""));
}

std::vector<RedisReply> RedlockExecutor::pipeline(const std::vector<RedisCommand>& commands) {
  return urgent_pipeline(commands, std::chrono::steady_clock::time_point::max());
}

std::vector<RedisReply> RedlockExecutor::urgent_pipeline(const std::vector<RedisCommand>& commands,
                                                         std::chrono::steady_clock::time_point deadline) {
  std::vector<std::optional<std::vector<RedisReply>>> replies(nodes_.size());
  const bool urgent = deadline != std::chrono::steady_clock::time_point::max();
  const auto failures = detail::in_parallel(nodes_.size(), [&](std::size_t i) {
    replies[i] = urgent ? nodes_[i]->urgent_pipeline(commands, deadline) : nodes_[i]->pipeline(commands);
  });
  std::vector<detail::NodeAnswer> answers(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    answers[i].endpoint = nodes_[i]->endpoint();
    if (failures[i]) answers[i].failure = detail::message_of(failures[i]);
    if (failures[i] || replies[i]->size() != commands.size()) replies[i].reset();
    if (replies[i]) answers[i].reply = RedisReply{};
  }
  if (answered(answers) < detail::majority_of(nodes_.size())) {
    throw ConnectionError("redlock: no majority of the nodes could run a pipeline: " + detail::quorum_summary(answers));
  }
  // Command by command, as command() decides one.
  std::vector<RedisReply> agreed;
  agreed.reserve(commands.size());
  for (std::size_t k = 0; k < commands.size(); ++k) {
    std::vector<std::optional<RedisReply>> per_node(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (replies[i]) per_node[i] = std::move((*replies[i])[k]);
    }
    std::optional<RedisReply> reply = majority_given(per_node);
    if (!reply) {
      reply = RedisReply{RedisReply::Type::Error, 0,
                         std::string(detail::kNoQuorumError) + " no majority of the nodes gave the same reply to " +
                             (commands[k].empty() ? std::string() : commands[k].front()),
                         {}};
    }
    agreed.push_back(std::move(*reply));
  }
  return agreed;
}

Subscription RedlockExecutor::subscribe(const std::string& channel, MessageHandler on_message,
                                        std::optional<std::chrono::milliseconds> confirm_within) {
  auto subscriptions = std::make_shared<std::vector<Subscription>>(nodes_.size());
  const auto failures = detail::in_parallel(nodes_.size(), [&](std::size_t i) {
    (*subscriptions)[i] = nodes_[i]->subscribe(channel, on_message, confirm_within);
  });
  std::size_t listening = 0;
  for (const auto& failure : failures) listening += failure ? 0 : 1;
  if (listening == 0) std::rethrow_exception(failures.front());
  return Subscription([subscriptions] {
    for (auto& subscription : *subscriptions) subscription.reset();
  });
}

std::string RedlockExecutor::endpoint() const {
  std::string names;
  for (const auto& node : nodes_) names += (names.empty() ? "" : ", ") + node->endpoint();
  return "redlock[" + names + "]";
}

void RedlockExecutor::for_each_master(const std::function<void(RedisExecutor& master)>& visit) {
  // A node down is passed over while others answer: each holds every lock there is.
  std::vector<detail::NodeAnswer> answers;
  bool visited = false;
  for (const auto& node : nodes_) {
    detail::NodeAnswer answer{node->endpoint(), std::nullopt, {}, true};
    try {
      visit(*node);
      answer.reply = RedisReply{};
      visited = true;
    } catch (const ConnectionError& e) {
      answer.failure = e.what();
    }
    answers.push_back(std::move(answer));
  }
  if (!visited) throw ConnectionError("redlock: no node answered: " + detail::quorum_summary(answers));
}

Subscription RedlockExecutor::watch_resets(ResetHandler on_reset) { return watch_->watch(std::move(on_reset)); }

std::vector<RedisExecutor*> RedlockExecutor::quorum_nodes() {
  std::vector<RedisExecutor*> nodes;
  for (const auto& node : nodes_) nodes.push_back(node.get());
  return nodes;
}

}  // namespace dlock
