#include "dlock/cluster_executor.hpp"

#include <algorithm>
#include <array>
#include <future>
#include <map>
#include <system_error>
#include <thread>
#include <utility>

#include "cluster/cluster_replies.hpp"
#include "cluster/cluster_topology.hpp"
#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"
#include "dlock/subscriber.hpp"
#include "cluster/hash_slot.hpp"

namespace dlock {
namespace {

using detail::ClusterTopology;
using detail::CommandKind;
using detail::CommandRoute;
using Node = ClusterTopology::Node;
using Clock = std::chrono::steady_clock;

// Redirections one command may follow before its caller is told.
constexpr int kMaxRedirects = 5;
// Pauses between tries while a slot migrates, or the cluster is down or failing over.
constexpr Millis kFirstPause{10};
constexpr Millis kMaxPause{100};
// The error reply of a command whose node failed while other nodes of the same pipeline answered.
constexpr std::string_view kUnreachable = "DLOCK_UNREACHABLE ";

// A node could not be connected to: nothing was sent, so trying again is safe.
struct Unreachable {
  std::string why;
};

detail::ConnectionPool::Lease borrow(Node& node) {
  try {
    return node.pool.borrow();
  } catch (const ConnectionError& e) {
    throw Unreachable{e.what()};
  }
}

// "TRYAGAIN" or "CLUSTERDOWN" when `reply` says so: a state that passes.
std::string_view cluster_state(const RedisReply& reply) {
  if (!reply.is_error()) return {};
  for (const std::string_view state : {std::string_view("TRYAGAIN"), std::string_view("CLUSTERDOWN")}) {
    if (reply.str.starts_with(state) && (reply.str.size() == state.size() || reply.str[state.size()] == ' ')) {
      return state;
    }
  }
  return {};
}

RedisReply& head(RedisReply& reply, std::size_t) { return reply; }
RedisReply& head(std::vector<RedisReply>& replies, std::size_t at) { return replies.at(at); }

bool is_noscript(const RedisReply& reply) { return reply.is_error() && reply.str.starts_with("NOSCRIPT"); }

// The SHA an EVALSHA names, else empty.
template <typename Part>
std::string_view sha_of(std::span<const Part> argv) {
  if (argv.size() < 2 || argv[0].size() != 7) return {};
  const std::string_view name = argv[0];
  return name == "EVALSHA" || name == "evalsha" ? std::string_view(argv[1]) : std::string_view();
}

CommandRoute route_of_command(const RedisCommand& argv) {
  std::array<std::string_view, 4> parts;
  const std::size_t count = std::min(parts.size(), argv.size());
  for (std::size_t i = 0; i < count; ++i) parts[i] = argv[i];
  return detail::route_of(std::span<const std::string_view>(parts.data(), count));
}

std::string slot_text(const CommandRoute& route) {
  return route.kind == CommandKind::keyed ? "slot " + std::to_string(route.slot) : std::string("a keyless command");
}

bool reply_is_sha(const RedisReply& reply) { return reply.type == RedisReply::Type::String && reply.str.size() == 40; }

// Loads a script on one node; whether it worked.
bool load_script(Node& node, const std::string& source, bool urgent, Clock::time_point deadline) {
  const RedisCommand load{"SCRIPT", "LOAD", source};
  try {
    const RedisReply reply = urgent ? node.urgent.pipeline({load}, deadline).at(0) : borrow(node)->command(load);
    return reply_is_sha(reply);
  } catch (const ConnectionError&) {
    return false;
  } catch (const Unreachable&) {
    return false;
  }
}

RedisReply unreachable_reply(const std::string& why) {
  RedisReply reply;
  reply.type = RedisReply::Type::Error;
  reply.str = std::string(kUnreachable) + why;
  return reply;
}

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

// Commands that go to one node together: a keyed command and the keyless
// ones after it (a WAIT goes where the write before it went).
struct ClusterExecutor::Unit {
  CommandRoute route;
  std::vector<std::size_t> at;  // the commands' places in the pipeline
  std::size_t keyed = 0;        // which of them is the keyed one (keyless ones may come first)
};

ClusterExecutor::ClusterExecutor(RedisConfig config)
    : config_(std::move(config)),
      topology_(std::make_unique<detail::ClusterTopology>(config_)),
      generation_(detail::fork_generation()) {
  RedisConfig subscriber_config = config_;
  subscriber_config.endpoint_source = topology_->subscriber_source();
  subscriber_ = std::make_unique<detail::Subscriber>(std::move(subscriber_config));
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

template <typename Result, typename Send>
Result ClusterExecutor::routed(const CommandRoute& route, Clock::time_point deadline, bool urgent, Send&& send,
                               std::size_t head_at, std::string_view sha) {
  int redirects = 0;
  Millis pause = kFirstPause;
  Node* target = nullptr;  // where the last redirection pointed
  bool asking = false;
  // Sleeps before the next try (reading the map again first if `reread`); false when the deadline comes first.
  const auto pause_before_retry = [&](std::uint64_t seen, bool reread, const Node* avoid) {
    if (Clock::now() + pause >= deadline) return false;
    if (reread) topology_->refresh(seen, deadline, avoid);
    if (Clock::now() + pause >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kMaxPause);
    return true;
  };
  for (;;) {
    const std::uint64_t seen = topology_->version();
    Node* node = target                                ? target
                 : route.kind == CommandKind::keyed ? topology_->master_of(route.slot)
                                                    : topology_->any_master();
    target = nullptr;
    const bool ask = std::exchange(asking, false);
    if (node == nullptr) {
      if (pause_before_retry(seen, true, nullptr)) continue;
      throw ConnectionError("redis " + endpoint() + ": no master serves " + slot_text(route) +
                            " (the cluster lost it, or a failover is under way); nothing was sent");
    }
    std::optional<Result> result;
    try {
      result.emplace(send(*node, ask));
    } catch (const Unreachable& failure) {
      if (pause_before_retry(seen, true, node)) continue;
      throw ConnectionError(failure.why + "; the master of " + slot_text(route) + " in " + endpoint() +
                            " stayed unreachable for the command timeout (a failover may be under way); "
                            "nothing was sent");
    } catch (const ConnectionError&) {
      // The command may have run: the caller decides whether to repeat it.
      // The map is read again so that the next call goes where it now must.
      topology_->refresh(seen, std::min(deadline, Clock::now() + config_.connect_timeout), node);
      // The watchdog's renewals may be repeated: on the new master, at once.
      Node* now_serving = route.kind == CommandKind::keyed ? topology_->master_of(route.slot) : nullptr;
      if (urgent && now_serving != nullptr && now_serving != node && Clock::now() < deadline) continue;
      throw;
    }
    RedisReply& reply = head(*result, head_at);
    if (const auto redirect = detail::redirect_of(reply, node->address.host)) {
      // MOVEDs are counted: each says the map changed. An ASK says only that
      // the slot is migrating; the importing node may then answer TRYAGAIN,
      // and that cycle lasts as long as the migration: the deadline bounds it.
      const bool moved = redirect->kind == detail::Redirect::Kind::moved;
      if (moved && ++redirects > kMaxRedirects) {
        throw ConnectionError("redis " + endpoint() + ": " + slot_text(route) + " was redirected " +
                              std::to_string(kMaxRedirects) + " times (last: " + reply.str +
                              "); the cluster's slot map keeps changing: try again once resharding settles");
      }
      if (!moved && Clock::now() >= deadline) {
        // An ASK means the command did not run. Said as TRYAGAIN (not as a
        // ConnectionError, "may have run"), the caller waits the migration
        // out within its own wait, as it does the importing node's TRYAGAIN.
        reply.str = "TRYAGAIN " + slot_text(route) + " is migrating and was still redirected with ASK when the "
                    "command timeout ran out (last: " + reply.str + ")";
        return std::move(*result);
      }
      Node& to = topology_->node_at(redirect->to);
      if (moved) {
        topology_->moved(redirect->slot, to);
        topology_->refresh(seen, deadline, nullptr);  // a failover or resharding moves more than this slot
      } else {
        asking = true;  // ASK: this command only, the slot stays where it is
      }
      target = &to;
      continue;
    }
    // A master that never saw the script (promoted, restarted): load it there, once, and send again.
    if (is_noscript(reply) && !sha.empty() && redirects < kMaxRedirects) {
      if (const std::optional<std::string> source = script_source(sha); source && load_script(*node, *source, urgent, deadline)) {
        ++redirects;
        target = node;
        continue;
      }
    }
    if (const std::string_view state = cluster_state(reply); !state.empty()) {
      if (pause_before_retry(seen, state == "CLUSTERDOWN", nullptr)) continue;
      // Nothing ran, and the reply says so: the caller waits the state out
      // as long as it may (a lock() its wait, a release the lock's validity).
    }
    return std::move(*result);
  }
}

RedisReply ClusterExecutor::command(const RedisCommand& argv) {
  const std::vector<std::string_view> parts(argv.begin(), argv.end());
  return command_parts(parts);
}

RedisReply ClusterExecutor::command_parts(std::span<const std::string_view> argv) {
  if (argv.empty()) throw InvalidArgument("redis command is empty");
  const CommandRoute route = detail::route_of(argv);
  const Clock::time_point deadline = Clock::now() + config_.command_timeout;
  if (route.kind == CommandKind::every_master) {
    return to_every_master(RedisCommand(argv.begin(), argv.end()), false, deadline);
  }
  return routed<RedisReply>(
      route, deadline, false,
      [&](Node& node, bool asking) -> RedisReply {
        auto connection = borrow(node);
        if (!asking) return connection->command(argv);
        std::vector<RedisReply> replies =
            connection->pipeline({RedisCommand{"ASKING"}, RedisCommand(argv.begin(), argv.end())});
        return std::move(replies.at(1));
      },
      0, sha_of(argv));
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

std::vector<RedisReply> ClusterExecutor::run_unit(const std::vector<RedisCommand>& commands, const Unit& unit,
                                                  bool urgent, Clock::time_point deadline) {
  const RedisCommand& keyed = commands[unit.at[unit.keyed]];
  return routed<std::vector<RedisReply>>(
      unit.route, deadline, urgent,
      [&](Node& node, bool asking) {
        std::vector<RedisCommand> batch;
        batch.reserve(unit.at.size() + 1);
        // ASKING holds for the next command only: right before the keyed one
        // (keyless commands may come first in the unit).
        for (std::size_t k = 0; k < unit.at.size(); ++k) {
          if (asking && k == unit.keyed) batch.push_back({"ASKING"});
          batch.push_back(commands[unit.at[k]]);
        }
        std::vector<RedisReply> replies =
            urgent ? node.urgent.pipeline(batch, deadline) : borrow(node)->pipeline(batch);
        if (asking && replies.size() > unit.keyed) {
          replies.erase(replies.begin() + static_cast<std::ptrdiff_t>(unit.keyed));
        }
        if (replies.size() != unit.at.size()) throw ConnectionError("redis " + node.name + ": replies went missing");
        return replies;
      },
      unit.keyed, sha_of(std::span<const std::string>(keyed)));
}

std::vector<RedisReply> ClusterExecutor::split_pipeline(const std::vector<RedisCommand>& commands, bool urgent,
                                                        Clock::time_point deadline) {
  // Checked before anything is sent, as on one server.
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (commands[i].empty()) {
      throw InvalidArgument("redis command " + std::to_string(i + 1) + " of " + std::to_string(commands.size()) +
                            " in a pipeline is empty; nothing was sent");
    }
  }
  std::vector<RedisReply> replies(commands.size());
  std::vector<Unit> units;
  std::vector<std::size_t> leading;  // keyless commands before the first keyed one
  bool in_order = true;              // the units, one after the other, are the pipeline as given
  for (std::size_t i = 0; i < commands.size(); ++i) {
    const CommandRoute route = route_of_command(commands[i]);
    if (route.kind == CommandKind::every_master) {
      // SCRIPT LOAD: on every master, before the commands after it are sent.
      replies[i] = to_every_master(commands[i], urgent, deadline);
      in_order = false;
    } else if (route.kind == CommandKind::keyed) {
      units.push_back({route, {i}});
    } else if (units.empty()) {
      leading.push_back(i);
    } else {
      units.back().at.push_back(i);
    }
  }
  if (!leading.empty()) {
    if (units.empty()) {
      units.push_back({CommandRoute{}, leading});
    } else {
      units.front().at.insert(units.front().at.begin(), leading.begin(), leading.end());
      units.front().keyed = leading.size();
    }
  }
  if (units.empty()) return replies;

  // The units by node, each node's in the pipeline's order.
  std::map<Node*, std::vector<std::size_t>> by_node;
  std::vector<std::size_t> unplaced;  // no master known for their slot: routed one by one
  for (std::size_t u = 0; u < units.size(); ++u) {
    Node* node = units[u].route.kind == CommandKind::keyed ? topology_->master_of(units[u].route.slot)
                                                            : topology_->any_master();
    if (node) {
      by_node[node].push_back(u);
    } else {
      unplaced.push_back(u);
    }
  }
  struct Outcome {
    std::vector<RedisReply> replies;
    bool failed = false;
    bool retry = false;  // nothing was sent, or the commands may be repeated (urgent)
    std::string why;
  };
  const std::vector<std::pair<Node*, std::vector<std::size_t>>> groups(by_node.begin(), by_node.end());
  const bool whole = groups.size() == 1 && unplaced.empty() && in_order;
  const auto send_group = [&](const std::pair<Node*, std::vector<std::size_t>>& group) {
    Outcome outcome;
    std::vector<RedisCommand> batch;
    if (!whole) {
      for (const std::size_t u : group.second) {
        for (const std::size_t i : units[u].at) batch.push_back(commands[i]);
      }
    }
    const std::vector<RedisCommand>& sent = whole ? commands : batch;
    try {
      outcome.replies = urgent ? group.first->urgent.pipeline(sent, deadline) : borrow(*group.first)->pipeline(sent);
    } catch (const Unreachable& failure) {
      outcome = Outcome{{}, true, true, failure.why};
    } catch (const ConnectionError& e) {
      outcome = Outcome{{}, true, urgent, e.what()};
    }
    return outcome;
  };
  // Every node's share goes out at once: the slowest node sets the time, not their sum.
  std::vector<Outcome> outcomes(groups.size());
  {
    std::vector<std::future<Outcome>> others;
    for (std::size_t g = 1; g < groups.size(); ++g) {
      try {
        others.push_back(std::async(std::launch::async, send_group, std::cref(groups[g])));
      } catch (const std::system_error&) {
        others.push_back(std::async(std::launch::deferred, send_group, std::cref(groups[g])));  // no thread to spare
      }
    }
    outcomes[0] = send_group(groups[0]);
    for (std::size_t g = 1; g < groups.size(); ++g) outcomes[g] = others[g - 1].get();
  }

  // Units that failed, were redirected or met a passing state go again, one by one.
  std::vector<std::pair<std::size_t, std::string>> again = {};
  for (const std::size_t u : unplaced) again.emplace_back(u, "");
  bool answered = false;
  bool moved = false;
  const std::uint64_t seen = topology_->version();
  std::optional<ConnectionError> first_failure;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const Outcome& outcome = outcomes[g];
    std::size_t next = 0;
    for (const std::size_t u : groups[g].second) {
      const Unit& unit = units[u];
      if (outcome.failed) {
        if (outcome.retry) {
          again.emplace_back(u, outcome.why);
        } else {
          for (const std::size_t i : unit.at) replies[i] = unreachable_reply(outcome.why);
          if (!first_failure) first_failure.emplace(outcome.why);
        }
        continue;
      }
      answered = true;
      const RedisReply& first = outcome.replies.at(next + unit.keyed);
      if (const auto redirect = detail::redirect_of(first, groups[g].first->address.host);
          redirect && redirect->kind == detail::Redirect::Kind::moved) {
        topology_->moved(redirect->slot, topology_->node_at(redirect->to));
        moved = true;
      }
      if (detail::redirect_of(first, groups[g].first->address.host) || !cluster_state(first).empty() ||
          (is_noscript(first) && !sha_of(std::span<const std::string>(commands[unit.at[unit.keyed]])).empty() &&
           script_source(sha_of(std::span<const std::string>(commands[unit.at[unit.keyed]]))))) {
        again.emplace_back(u, "");
        next += unit.at.size();
        continue;
      }
      for (const std::size_t i : unit.at) replies[i] = outcome.replies.at(next++);
    }
  }
  // A failover or resharding moves more than one slot.
  if (moved) topology_->refresh(seen, deadline);
  for (const auto& [u, why] : again) {
    try {
      std::vector<RedisReply> unit_replies = run_unit(commands, units[u], urgent, deadline);
      for (std::size_t k = 0; k < units[u].at.size(); ++k) {
        replies[units[u].at[k]] = k < unit_replies.size() ? std::move(unit_replies[k]) : unreachable_reply("no reply");
      }
      answered = true;
    } catch (const ConnectionError& e) {
      for (const std::size_t i : units[u].at) replies[i] = unreachable_reply(e.what());
      if (!first_failure) first_failure.emplace(e.what());
    }
  }
  if (!answered && first_failure) throw *first_failure;
  return replies;
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

std::vector<RedisReply> ClusterExecutor::pipeline(const std::vector<RedisCommand>& commands) {
  if (commands.empty()) return {};
  return split_pipeline(commands, false, Clock::now() + config_.command_timeout);
}

std::vector<RedisReply> ClusterExecutor::urgent_pipeline(const std::vector<RedisCommand>& commands,
                                                         Clock::time_point deadline) {
  if (commands.empty()) return {};
  return split_pipeline(commands, true, deadline);
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
