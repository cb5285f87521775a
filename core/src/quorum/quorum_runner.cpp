// The script runner over a Redlock: every call sent to every node at once, the
// nodes' replies made one by quorum.hpp's rules, an acquire no majority granted
// given back, a node that failed rested for a while.
#include "dlock/scripts.hpp"

#include "dlock/detail/held_lock.hpp"
#include "dlock/detail/in_parallel.hpp"
#include "dlock/detail/quorum.hpp"
#include "dlock/detail/small_buffer.hpp"
#include "dlock/errors.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <random>
#include <string>

#include <poll.h>

namespace dlock::detail {

void ScriptRunner::rest(std::size_t node, std::chrono::steady_clock::time_point now) {
  nodes_[node].resting_until->store((now + kNodeRest).time_since_epoch().count());
}

std::unique_ptr<PendingReply> ScriptRunner::send_to_node(std::size_t i, std::span<const std::string_view> parts,
                                                         bool undoes, NodeAnswer& answer) {
  answer.endpoint = nodes_[i].endpoint;
  answer.sent = false;
  const auto now = std::chrono::steady_clock::now();
  // A node silent for a whole command timeout since its oldest reply owed is given a rest.
  const OwedReplies::Settled owed = nodes_[i].owed->settle(now);
  if (owed.silent || owed.failed) {
    rest(i, now);
  } else if (owed.answered && !owed.owing) {
    // It owed replies and has sent them all: it answers again, so its rest ends (a release is not skipped).
    nodes_[i].resting_until->store(0);
  }
  const bool resting = now.time_since_epoch().count() < nodes_[i].resting_until->load();
  try {
    std::unique_ptr<PendingReply> pending;
    bool owing = owed.owing;
    // Not dialled again while it owes a reply: the call follows on that connection. A
    // resting node still gets a release there, so it does not keep a freed grant for a lease.
    if (owing && (undoes || !resting)) pending = nodes_[i].owed->send_after(parts, undoes, owing);
    if (!pending && resting) {
      // A node that just failed is given a rest: calls would otherwise each
      // open a connection to it (and a paused server's backlog fills up).
      answer.failure = "redis " + nodes_[i].endpoint + ": skipped: it failed less than " +
                       std::to_string(kNodeRest.count()) + " ms ago";
      return nullptr;
    }
    if (!pending && owing) {
      answer.failure = "redis " + nodes_[i].endpoint + ": skipped: it still owes replies to earlier calls";
      return nullptr;
    }
    if (!pending) pending = nodes_[i].redis->start(parts);
    answer.sent = true;
    return pending;
  } catch (const Error& e) {
    answer.failure = e.what();
    answer.login_refused = dynamic_cast<const AuthenticationError*>(&e) != nullptr;
    rest(i, std::chrono::steady_clock::now());
    return nullptr;
  }
}

namespace {

// Whether a majority of the answers so far say yes: the call's outcome is known.
template <bool (*Yes)(const RedisReply&)>
bool majority_said_yes(const std::vector<NodeAnswer>& answers) {
  const auto yes = std::count_if(answers.begin(), answers.end(),
                                 [](const NodeAnswer& a) { return a.reply && a.votes && Yes(*a.reply); });
  return static_cast<std::size_t>(yes) >= majority_of(answers.size());
}
bool is_granted(const RedisReply& r) {
  return (r.type == RedisReply::Type::Integer && r.integer > 0) || r.type == RedisReply::Type::String;
}
bool is_freed(const RedisReply& r) { return r.type == RedisReply::Type::String; }
bool is_one(const RedisReply& r) { return r.type == RedisReply::Type::Integer && r.integer == 1; }

// Whether the node's reply counts now, and if not, how long it still sits out (for the messages).
void note_vote(RedisExecutor& node, NodeAnswer& answer) {
  answer.votes = node.may_vote();
  if (!answer.votes) answer.sits_out_for = node.sits_out_for();
}

// A split vote's retry comes after a pause of the caller's own, so that callers who split once do not split again.
long long split_vote_jitter_ms() {
  thread_local std::minstd_rand random(std::random_device{}());
  return std::uniform_int_distribution<long long>(1, 10)(random);
}

}  // namespace

void ScriptRunner::load_on_quorum() {
  // Enough nodes to make a majority must have the scripts; the others load them when they come back.
  const auto failures = in_parallel(nodes_.size(), [this](std::size_t i) {
    nodes_[i].scripts->load_all();
    nodes_[i].scripts->load(kRaiseFenceScript);  // Redlock's own
  });
  std::vector<NodeAnswer> answers;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    NodeAnswer answer{nodes_[i].endpoint, std::nullopt, {}, true};
    if (failures[i]) {
      answer.failure = message_of(failures[i]);
    } else {
      answer.reply = RedisReply{};
    }
    answers.push_back(std::move(answer));
  }
  const auto loaded = std::count_if(answers.begin(), answers.end(), [](const NodeAnswer& a) { return a.reply; });
  if (static_cast<std::size_t>(loaded) < majority_of(nodes_.size())) {
    throw ConnectionError("redlock: cannot load the scripts on a majority of the nodes: " + quorum_summary(answers) +
                          "; check the nodes named (redis.redlock.nodes)");
  }
}

std::string_view ScriptRunner::learn_sha(const Script& script) {
  // A script's SHA is the same on every node: learnt from the first that
  // loads it, it is sent to all, and a node without the script answers
  // NOSCRIPT and loads it then. A node down is never waited for here.
  // First from a node that loaded it already (at start-up): no round trip, and no waiting on a node that is down.
  for (Node& node : nodes_) {
    std::lock_guard node_lock(node.scripts->mutex_);
    auto it = node.scripts->shas_.find(&script);
    if (it == node.scripts->shas_.end()) continue;
    std::lock_guard lock(mutex_);
    return shas_.try_emplace(&script, it->second).first->second;
  }
  std::vector<NodeAnswer> answers;
  for (Node& node : nodes_) {
    try {
      const std::string_view sha = node.scripts->sha_of(script);
      std::lock_guard lock(mutex_);
      return shas_.try_emplace(&script, sha).first->second;
    } catch (const Error& e) {
      answers.push_back(NodeAnswer{node.endpoint, std::nullopt, e.what(), true});
    }
  }
  throw ConnectionError("redlock: no node could load the " + std::string(script.name) +
                        " script: " + quorum_summary(answers));
}

std::vector<NodeAnswer> ScriptRunner::ask_every_node(const Script& script, std::span<const std::string_view> keys,
                                                     std::span<const std::string_view> args,
                                                     std::chrono::steady_clock::time_point give_up_at,
                                                     Decided decided, bool wait_for_all,
                                                     std::optional<std::chrono::steady_clock::time_point>* decided_at,
                                                     std::vector<std::unique_ptr<PendingReply>>* unread) {
  std::optional<std::chrono::steady_clock::time_point> decided_here;
  if (!decided_at) decided_at = &decided_here;
  const auto started = std::chrono::steady_clock::now();
  SmallBuffer<std::string_view, 16> buffer(3 + keys.size() + args.size());
  const std::span<std::string_view> parts = buffer.span();
  const std::string key_count = std::to_string(keys.size());
  parts[0] = "EVALSHA";
  parts[2] = key_count;
  std::copy(keys.begin(), keys.end(), parts.begin() + 3);
  std::copy(args.begin(), args.end(), parts.begin() + 3 + static_cast<std::ptrdiff_t>(keys.size()));

  // Every node is sent its call before any reply is read: the round trips overlap.
  std::vector<NodeAnswer> answers(nodes_.size());
  std::vector<std::unique_ptr<PendingReply>> pending(nodes_.size());
  parts[1] = sha_of(script);
  const bool undoes = &script == &kReleaseScript || &script == &kLeaveScript || &script == &kForceReleaseScript;
  for (std::size_t i = 0; i < nodes_.size(); ++i) pending[i] = send_to_node(i, parts, undoes, answers[i]);
  // Replies are read as they come, whichever node answers first, until every
  // node answered or gave up, or `decided` says the outcome is known: a node
  // slower than the others (paused, far away) then costs the call nothing,
  // and its reply is left unread (kept owed on its connection; its command runs).
  std::vector<std::unique_ptr<PendingReply>> left_unread(nodes_.size());
  std::vector<std::size_t> lost_scripts;
  std::vector<pollfd> watched;
  for (;;) {
    bool waiting = false;
    const auto now = std::chrono::steady_clock::now();
    auto wake = give_up_at;
    watched.clear();
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (!pending[i]) continue;
      try {
        if (std::optional<RedisReply> reply = pending[i]->take_if_arrived()) {
          pending[i].reset();  // its connection goes back to the pool: may_vote may need it
          if (is_noscript(*reply)) {
            lost_scripts.push_back(i);
          } else {
            answers[i].reply = std::move(*reply);
            note_vote(*nodes_[i].redis, answers[i]);
          }
          continue;
        }
        if (now >= std::min(pending[i]->due(), give_up_at)) {
          answers[i].failure = "redis " + nodes_[i].endpoint + ": no reply in time";
          // Silent for its whole command timeout (not just past this call's own limit): rest it.
          if (now >= pending[i]->due()) rest(i, now);
          left_unread[i] = std::move(pending[i]);
          continue;
        }
      } catch (const Error& e) {
        answers[i].failure = e.what();
        answers[i].login_refused = dynamic_cast<const AuthenticationError*>(&e) != nullptr;
        pending[i].reset();
        rest(i, now);
        continue;
      }
      waiting = true;
      wake = std::min(wake, pending[i]->due());
      const int fd = pending[i]->ready_fd();
      if (fd < 0) wake = now;  // bytes already in hand: look again at once
      watched.push_back(pollfd{fd, POLLIN, 0});
    }
    if (decided && !*decided_at && decided(answers)) *decided_at = std::chrono::steady_clock::now();
    if (*decided_at) {
      const auto stragglers_until = **decided_at + (**decided_at - started);
      if (!wait_for_all || now >= stragglers_until) break;
      wake = std::min(wake, stragglers_until);
    }
    if (!waiting) break;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    ::poll(watched.data(), watched.size(), static_cast<int>(std::clamp<long long>(left, 0, 1000)));
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (pending[i]) {
      answers[i].failure = "redis " + nodes_[i].endpoint + ": not waited for (a majority had answered)";
      left_unread[i] = std::move(pending[i]);
    }
    if (!unread) nodes_[i].owed->keep(std::move(left_unread[i]));
  }
  if (unread) *unread = std::move(left_unread);
  // A node that lost its scripts (a restart, SCRIPT FLUSH) loads them and runs the call again.
  for (std::size_t i : lost_scripts) {
    try {
      answers[i].reply = nodes_[i].scripts->run(script, keys, args);
      note_vote(*nodes_[i].redis, answers[i]);
    } catch (const Error& e) {
      answers[i].failure = e.what();
      answers[i].login_refused = dynamic_cast<const AuthenticationError*>(&e) != nullptr;
    }
  }
  return answers;
}

RedisReply ScriptRunner::run_on_quorum(const Script& script, std::span<const std::string_view> keys,
                                       std::span<const std::string_view> args) {
  if (&script == &kAcquireScript) {
    // The validity is counted from before the first node was sent the call.
    const auto sent = std::chrono::steady_clock::now();
    long long lease_ms = 0;
    std::from_chars(args[1].data(), args[1].data() + args[1].size(), lease_ms);
    const Millis lease(lease_ms);
    // A reply later than the validity's end could not count: it is not waited for.
    const auto valid_until = sent + lease - clock_drift(lease);
    // Once a majority granted, the others are waited for as long again as the
    // majority took (and never past the validity's end): a node left unread
    // may grant after this caller's release reached it on another
    // connection, and hold the lock there, a minority, for one lease. The
    // validity is judged by when the majority had granted.
    std::optional<std::chrono::steady_clock::time_point> granted_at;
    std::vector<std::unique_ptr<PendingReply>> unread;
    std::vector<NodeAnswer> answers =
        ask_every_node(script, keys, args, valid_until, &majority_said_yes<is_granted>, true, &granted_at, &unread);
    const bool validity_spent = (granted_at ? *granted_at : std::chrono::steady_clock::now()) >= valid_until;
    AcquireOutcome outcome = combine_acquire(answers, validity_spent, split_vote_jitter_ms());
    if (!outcome.to_undo.empty()) {
      // A node the acquire never reached has nothing to give back: it is not dialled again.
      std::vector<std::size_t> reached;
      std::vector<bool> answered(answers.size());
      for (std::size_t i : outcome.to_undo) {
        if (answers[i].sent) reached.push_back(i);
      }
      for (std::size_t i = 0; i < answers.size(); ++i) answered[i] = answers[i].reply.has_value();
      if (!reached.empty()) give_back(reached, answered, keys, args, unread);
    }
    // A grant still to come is owed: this caller's release will follow it on the same connection.
    for (std::size_t i = 0; i < unread.size(); ++i) nodes_[i].owed->keep(std::move(unread[i]));
    if (outcome.outage && outcome.votes_from) throw RestartDelayError(*outcome.outage, *outcome.votes_from);
    if (outcome.outage) {
      // Nodes that refused the login, enough of them that no majority is left
      // without them: a setting to fix, not an outage to wait out.
      const auto refused = static_cast<std::size_t>(
          std::count_if(answers.begin(), answers.end(), [](const NodeAnswer& a) { return a.login_refused; }));
      if (refused > answers.size() - majority_of(answers.size())) {
        throw AuthenticationError(*outcome.outage + "; " + std::to_string(refused) + " of " +
                                  std::to_string(answers.size()) +
                                  " nodes refused the login: check redis.password (and redis.username)");
      }
      throw ConnectionError(*outcome.outage);
    }
    return std::move(outcome.reply);
  }
  const bool renews = &script == &kRenewScript || &script == &kRaiseFenceScript;
  const Decided decided = &script == &kReleaseScript ? &majority_said_yes<is_freed>
                          : renews                   ? &majority_said_yes<is_one>
                                                     : nullptr;
  // A release, renewal or raise left unread on a slow node is harmless: it is
  // owner-checked by the acquisition's id, so arriving late it changes nothing of anyone else's.
  const std::vector<NodeAnswer> answers =
      ask_every_node(script, keys, args, std::chrono::steady_clock::time_point::max(), decided, false, nullptr);
  if (&script == &kReleaseScript) return combine_release(answers);
  if (&script == &kRenewScript) return combine_renew(answers, "renew the lock");
  if (&script == &kRenewManyScript) return combine_renew_many(answers, keys.size());
  if (&script == &kLeaveScript) return combine_leave(answers);
  if (&script == &kForceReleaseScript) return combine_force_release(answers);
  if (&script == &kRaiseFenceScript) return combine_renew(answers, "raise the fencing token");
  throw InvalidArgument("the " + std::string(script.name) + " script has no quorum rule");
}

void ScriptRunner::give_back(const std::vector<std::size_t>& nodes, const std::vector<bool>& answered,
                             std::span<const std::string_view> keys, std::span<const std::string_view> acquire_args,
                             std::vector<std::unique_ptr<PendingReply>>& unread) {
  // acquire's ARGV: id, lease, "wait window retention arrival"; release's: id, "window retention".
  const std::string_view settings = acquire_args[2];
  const std::size_t window_at = std::min(settings.size(), settings.find(' ') + 1);
  const std::size_t retention_at = std::min(settings.size(), settings.find(' ', window_at) + 1);
  const std::string_view line_settings = settings.substr(window_at, settings.find(' ', retention_at) - window_at);
  std::string sha;
  try {
    sha = sha_of(kReleaseScript);
  } catch (const Error&) {
    return;  // no node has the scripts: none can have granted anything
  }
  std::vector<std::string> parts{"EVALSHA", sha, std::to_string(keys.size())};
  parts.insert(parts.end(), keys.begin(), keys.end());
  parts.emplace_back(acquire_args[0]);
  parts.emplace_back(line_settings);
  const std::vector<std::string_view> views(parts.begin(), parts.end());
  std::vector<std::unique_ptr<PendingReply>> pending(nodes.size());
  for (std::size_t j = 0; j < nodes.size(); ++j) {
    try {
      // After the acquire, on its connection: sent on another, the release could run first.
      std::unique_ptr<PendingReply>& acquire = unread[nodes[j]];
      if (acquire) pending[j] = acquire->then(views, true);
      if (pending[j]) acquire.reset();  // spent
      NodeAnswer unused;
      if (!pending[j]) pending[j] = send_to_node(nodes[j], views, true, unused);
    } catch (const Error&) {
      // Unreachable: what it granted, nobody renews; it idles out its lease.
    }
  }
  std::vector<std::size_t> lost_scripts;
  for (std::size_t j = 0; j < nodes.size(); ++j) {
    // A node that did not answer the acquire is not waited for again: the
    // release is sent, and runs whenever the node reads it (kept owed on its connection).
    if (!answered[nodes[j]]) {
      nodes_[nodes[j]].owed->keep(std::move(pending[j]));
      continue;
    }
    try {
      if (pending[j] && is_noscript(pending[j]->get())) lost_scripts.push_back(nodes[j]);
    } catch (const Error&) {
    }
    pending[j].reset();
  }
  // A node that lost its scripts still has the grant: load the script there and give it back.
  for (std::size_t node : lost_scripts) {
    try {
      const std::vector<std::string_view> release_args{acquire_args[0], line_settings};
      (void)nodes_[node].scripts->run(kReleaseScript, keys, release_args);
    } catch (const Error&) {
    }
  }
}

std::vector<RedisReply> ScriptRunner::run_pipelined_on_quorum(const Script& script,
                                                             const std::vector<ScriptCall>& calls,
                                                             std::chrono::steady_clock::time_point deadline) {
  if (&script != &kRenewManyScript) {
    throw InvalidArgument("the " + std::string(script.name) + " script has no pipelined quorum rule");
  }
  std::vector<std::vector<RedisReply>> per_node(nodes_.size());
  const auto failures = in_parallel(nodes_.size(), [&](std::size_t i) {
    per_node[i] = nodes_[i].scripts->run_pipelined(script, calls, deadline);
  });
  std::vector<NodeAnswer> voting(nodes_.size());  // each node's vote, alike for every call
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!failures[i]) note_vote(*nodes_[i].redis, voting[i]);
  }
  std::vector<RedisReply> combined;
  combined.reserve(calls.size());
  for (std::size_t call = 0; call < calls.size(); ++call) {
    std::vector<NodeAnswer> answers(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      answers[i].endpoint = nodes_[i].endpoint;
      answers[i].votes = !failures[i] && voting[i].votes;
      answers[i].sits_out_for = voting[i].sits_out_for;
      if (failures[i]) {
        answers[i].failure = message_of(failures[i]);
      } else if (call < per_node[i].size()) {
        answers[i].reply = std::move(per_node[i][call]);
      } else {
        answers[i].failure = "no reply";
      }
    }
    combined.push_back(combine_renew_many(answers, calls[call].keys.size()));
  }
  return combined;
}

}  // namespace dlock::detail
