// The script runner on one Redis (a server, a Sentinel's master, a Cluster):
// scripts sent by EVALSHA, loaded again after NOSCRIPT, one at a time or
// pipelined. Over a Redlock it hands each call to quorum/quorum_runner.cpp.
#include "dlock/scripts.hpp"

#include "redis/evalsha_parts.hpp"
#include "dlock/detail/transient_state.hpp"
#include "dlock/errors.hpp"

#include <algorithm>
#include <deque>
#include <span>
#include <string>

namespace dlock::detail {

ScriptRunner::ScriptRunner(RedisExecutor& redis, ReplicaAcknowledgement acknowledgement)
    : redis_(redis), acknowledgement_(acknowledgement) {
  for (RedisExecutor* node : redis.quorum_nodes()) {
    nodes_.push_back(Node{node, std::make_unique<ScriptRunner>(*node, acknowledgement), node->endpoint(),
                          std::make_unique<std::atomic<std::chrono::steady_clock::rep>>(0),
                          std::make_unique<OwedReplies>()});
  }
}

void ScriptRunner::load_all() {
  if (quorum()) {
    load_on_quorum();
    return;
  }
  // keep_in_line too: a waiter's first renewal by the line keeper must not cost a NOSCRIPT round trip and a load.
  for (const Script* script :
       {&kAcquireScript, &kReleaseScript, &kRenewScript, &kRenewManyScript, &kLeaveScript, &kKeepInLineScript}) {
    load(*script);
  }
}

std::string_view ScriptRunner::load(const Script& script) {
  RedisReply reply = redis_.command({"SCRIPT", "LOAD", std::string(script.source)});
  if (!transient_state(reply).empty()) {
    throw ConnectionError("redis " + redis_.endpoint() + ": cannot load the " + std::string(script.name) +
                          " script now: " + reply.str);
  }
  if (reply.type != RedisReply::Type::String) {
    throw RedisError("redis " + redis_.endpoint() + ": cannot load the " + std::string(script.name) +
                     " script: " + (reply.is_error() ? reply.str : std::string("unexpected reply")) +
                     "; the user needs the EVALSHA and SCRIPT commands");
  }
  // A script's SHA is the SHA1 of its text, the same after every reload, so
  // the first one stored stays: callers may keep views of it.
  std::lock_guard lock(mutex_);
  return shas_.try_emplace(&script, std::move(reply.str)).first->second;
}

std::string_view ScriptRunner::sha_of(const Script& script) {
  {
    std::lock_guard lock(mutex_);
    auto it = shas_.find(&script);
    if (it != shas_.end()) return it->second;
  }
  if (quorum()) return learn_sha(script);
  return load(script);
}

RedisCommand ScriptRunner::evalsha(std::string_view sha, std::span<const std::string_view> keys,
                                   std::span<const std::string_view> args) {
  RedisCommand cmd;
  cmd.reserve(3 + keys.size() + args.size());
  cmd.emplace_back("EVALSHA");
  cmd.emplace_back(sha);
  cmd.push_back(std::to_string(keys.size()));
  cmd.insert(cmd.end(), keys.begin(), keys.end());
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

bool ScriptRunner::is_noscript(const RedisReply& reply) {
  return reply.is_error() && reply.str.rfind("NOSCRIPT", 0) == 0;
}

RedisReply ScriptRunner::run(const Script& script, std::span<const std::string_view> keys,
                             std::span<const std::string_view> args) {
  if (quorum()) return run_on_quorum(script, keys, args);
  EvalshaParts parts(sha_of(script), keys, args);
  RedisReply reply = redis_.command_parts(parts.span());
  if (is_noscript(reply)) {
    parts.set_sha(load(script));
    reply = redis_.command_parts(parts.span());
  }
  return reply;
}

RedisReply ScriptRunner::run_acknowledged(const Script& script, std::span<const std::string_view> keys,
                                          std::span<const std::string_view> args, ReplyTest must_reach_replicas) {
  if (!acknowledges()) return run(script, keys, args);
  const std::vector<std::uint32_t> one_group{0};
  std::vector<RedisReply> replies = redis_.pipeline(with_waits({evalsha(sha_of(script), keys, args)}, one_group));
  if (!replies.empty() && is_noscript(replies.front())) {
    replies = redis_.pipeline(with_waits({evalsha(load(script), keys, args)}, one_group));
  }
  replies = fold_waits(std::move(replies), one_group, must_reach_replicas);
  if (replies.empty()) throw ConnectionError("redis " + redis_.endpoint() + ": no reply to " + std::string(script.name));
  return std::move(replies.front());
}

std::vector<RedisReply> ScriptRunner::run_pipelined(const Script& script, const std::vector<ScriptCall>& calls,
                                                    std::chrono::steady_clock::time_point deadline) {
  if (quorum()) return run_pipelined_on_quorum(script, calls, deadline);
  std::vector<std::uint32_t> groups;
  groups.reserve(calls.size());
  for (const ScriptCall& call : calls) groups.push_back(call.keys.empty() ? 0 : group_of(call.keys.front()));
  const std::string_view sha = sha_of(script);
  std::vector<RedisReply> replies;
  if (acknowledges()) {
    // One WAIT per group (a cluster's slot, so it goes to the node that took
    // the group's writes; one server: a single WAIT), after the group's last
    // call: a WAIT covers every write before it on its connection, and WAITs
    // in a row would each cost a replication round trip.
    std::vector<RedisCommand> commands;
    commands.reserve(calls.size());
    for (const ScriptCall& call : calls) commands.push_back(evalsha(sha, call.keys, call.args));
    replies = fold_waits(redis_.urgent_pipeline(with_waits(std::move(commands), groups), deadline), groups);
  } else {
    // Views of the calls' strings, not copies: at a million held locks the watchdog sends
    // 100,000 renewals a second, and each copy of a name or an owner is an allocation.
    std::deque<EvalshaParts> built;  // a deque's elements never move: the commands point into them
    std::vector<std::span<const std::string_view>> commands;
    commands.reserve(calls.size());
    for (const ScriptCall& call : calls) commands.push_back(built.emplace_back(sha, call.keys, call.args).span());
    replies = redis_.urgent_pipeline_parts(commands, deadline);
  }

  // After a restart or SCRIPT FLUSH: load the script and send those again,
  // in one pipeline on the same urgent path (the pool would queue it behind
  // user traffic). SCRIPT LOAD and EVALSHA, not EVAL: docs/operations.md's
  // minimal ACL grants just those.
  std::vector<std::size_t> retried_at;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (is_noscript(replies[i])) retried_at.push_back(i);
  }
  if (retried_at.empty()) return replies;
  std::vector<RedisCommand> again;
  std::vector<std::uint32_t> again_groups;
  for (std::size_t i : retried_at) {
    again.push_back(evalsha(sha, calls[i].keys, calls[i].args));
    again_groups.push_back(groups[i]);
  }
  std::vector<RedisCommand> retries{{"SCRIPT", "LOAD", script.source}};
  for (auto& command : with_waits(std::move(again), again_groups)) retries.push_back(std::move(command));
  std::vector<RedisReply> retried = redis_.urgent_pipeline(retries, deadline);
  if (!retried.empty()) retried.erase(retried.begin());  // SCRIPT LOAD's
  retried = fold_waits(std::move(retried), again_groups);
  for (std::size_t j = 0; j < retried_at.size() && j < retried.size(); ++j) {
    replies[retried_at[j]] = std::move(retried[j]);
  }
  return replies;
}

}  // namespace dlock::detail
