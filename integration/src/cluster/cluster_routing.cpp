// One command, or one unit of a pipeline, sent to the master of its slot:
// MOVED and ASK followed, TRYAGAIN and CLUSTERDOWN waited out, a missing script loaded.

#include <algorithm>
#include <optional>
#include <thread>
#include <utility>

#include "cluster/cluster_dispatch.hpp"
#include "cluster/cluster_replies.hpp"
#include "cluster/cluster_topology.hpp"
#include "dlock/cluster_executor.hpp"
#include "dlock/errors.hpp"
#include "cluster/hash_slot.hpp"

namespace dlock {
namespace {

using Clock = std::chrono::steady_clock;

// Redirections one command may follow before its caller is told.
constexpr int kMaxRedirects = 5;
// Pauses between tries while a slot migrates, or the cluster is down or failing over.
constexpr Millis kFirstPause{10};
constexpr Millis kMaxPause{100};

RedisReply& head(RedisReply& reply, std::size_t) { return reply; }
RedisReply& head(std::vector<RedisReply>& replies, std::size_t at) { return replies.at(at); }

std::string slot_text(const CommandRoute& route) {
  return route.kind == CommandKind::keyed ? "slot " + std::to_string(route.slot) : std::string("a keyless command");
}

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

}  // namespace

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

}  // namespace dlock
