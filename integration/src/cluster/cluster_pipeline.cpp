// A pipeline split by node: each master's share sent at once, in parallel, and
// what failed, was redirected or met a passing state sent again one unit at a time.

#include <algorithm>
#include <array>
#include <future>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "cluster/cluster_dispatch.hpp"
#include "cluster/cluster_replies.hpp"
#include "cluster/cluster_topology.hpp"
#include "dlock/cluster_executor.hpp"
#include "dlock/errors.hpp"
#include "cluster/hash_slot.hpp"

namespace dlock {
namespace {

// The error reply of a command whose node failed while other nodes of the same pipeline answered.
constexpr std::string_view kUnreachable = "DLOCK_UNREACHABLE ";

CommandRoute route_of_command(const RedisCommand& argv) {
  std::array<std::string_view, 4> parts;
  const std::size_t count = std::min(parts.size(), argv.size());
  for (std::size_t i = 0; i < count; ++i) parts[i] = argv[i];
  return detail::route_of(std::span<const std::string_view>(parts.data(), count));
}

RedisReply unreachable_reply(const std::string& why) {
  RedisReply reply;
  reply.type = RedisReply::Type::Error;
  reply.str = std::string(kUnreachable) + why;
  return reply;
}

}  // namespace

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

std::vector<RedisReply> ClusterExecutor::pipeline(const std::vector<RedisCommand>& commands) {
  if (commands.empty()) return {};
  return split_pipeline(commands, false, Clock::now() + config_.command_timeout);
}

std::vector<RedisReply> ClusterExecutor::urgent_pipeline(const std::vector<RedisCommand>& commands,
                                                         Clock::time_point deadline) {
  if (commands.empty()) return {};
  return split_pipeline(commands, true, deadline);
}

}  // namespace dlock
