#pragma once
// The nodes of a Redlock (redis.mode: redlock): N independent standalone
// masters, each reached through an executor of its own (a pool, the
// watchdog's reserved connection and a subscriber per node, TLS as
// configured). The lock logic, a majority deciding every script call, is the
// core's (ScriptRunner over quorum_nodes()); this executor carries what is
// not a lock decision:
// - command() and command_parts() go to every node at once (the service's
//   registry entry is written everywhere) and return the reply a majority of
//   the nodes gave alike; ConnectionError when none did (too few answered, or
//   they differ). pipeline() and urgent_pipeline() run on every node at once
//   and decide command by command the same way, a command no majority
//   answered alike getting an error reply starting DLOCK_NO_QUORUM;
//   ConnectionError when fewer than a majority ran the pipeline. Whatever
//   reads a lock's state from the nodes (owners, PTTLs, hold counts differ
//   while they agree on the holder) applies the quorum's rules to each
//   node's reply itself (quorum_nodes()), as the lock's scripts and the
//   dlock command do.
// - subscribe() listens on every node: a notice from any wakes the waiter.
// - for_each_master() visits every node (the CLI's SCAN).
// - watch_resets() tells of each node that restarted, once it answers: the
//   watchdog's round then asks every node, and the quorum's rules decide
//   whether the lock is still had (one node that forgot it is a minority).

#include <memory>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock {

namespace detail {
class MasterWatch;
}
class RedlockNode;

class RedlockExecutor final : public RedisExecutor {
 public:
  // One node per config.redlock.nodes, each with the rest of `config`. Dials nothing.
  explicit RedlockExecutor(const RedisConfig& config);
  ~RedlockExecutor() override;
  RedlockExecutor(const RedlockExecutor&) = delete;
  RedlockExecutor& operator=(const RedlockExecutor&) = delete;

  // Connects to every node at once; throws ConnectionError, naming each node
  // that failed and why, unless a majority answered. The others are retried
  // on every call.
  void connect();

  RedisReply command(const RedisCommand& argv) override;
  RedisReply command_parts(std::span<const std::string_view> argv) override;
  std::vector<RedisReply> pipeline(const std::vector<RedisCommand>& commands) override;
  std::vector<RedisReply> urgent_pipeline(const std::vector<RedisCommand>& commands,
                                          std::chrono::steady_clock::time_point deadline) override;
  Subscription subscribe(const std::string& channel, MessageHandler on_message,
                         std::optional<std::chrono::milliseconds> confirm_within = std::nullopt) override;
  std::string endpoint() const override;
  void for_each_master(const std::function<void(RedisExecutor& master)>& visit) override;
  std::vector<RedisExecutor*> quorum_nodes() override;
  Subscription watch_resets(ResetHandler on_reset) override;

 private:
  std::vector<std::shared_ptr<RedlockNode>> nodes_;
  std::unique_ptr<detail::MasterWatch> watch_;  // every node, on one thread
};

// One node of a Redlock: a standalone executor that also knows whether its
// grants may count (see RedisExecutor::may_vote). A node whose uptime is
// below redis.redlock.restarted_node_delay_ms restarted within one longest
// lease and may have forgotten locks it held: it sits out the rest of that
// time. Its uptime (INFO server) is read at connect() and again whenever
// its pool opened a connection since the last reading (a restart breaks
// every connection); that reading runs on a thread of the node's own, and
// until it is in, the node does not vote (may_vote() never waits for I/O).
// Redis counts uptime in whole seconds, so it is taken as a second less.
// A command, pipeline or connect() that failed (ConnectionError) makes the
// node's commands and pipelines fail at once for max(command_timeout,
// connect_timeout): a paused node costs steps that follow each other (the
// dlock command's, the start-up checks') one timeout together, not one each
// (the core's quorum runner rests a node for scripts alike).
class RedlockNode final : public RedisExecutor {
 public:
  RedlockNode(RedisConfig node_config, Millis restarted_node_delay);
  ~RedlockNode() override;

  // Opens a connection (PING) and reads the node's uptime and run_id: throws
  // ConnectionError, or ConfigError if the node refuses INFO while the restart rule needs it.
  void connect();
  // The server's run_id (INFO server), once read; empty before.
  std::string run_id() const;

  RedisReply command(const RedisCommand& argv) override;
  RedisReply command_parts(std::span<const std::string_view> argv) override;
  std::unique_ptr<PendingReply> start(std::span<const std::string_view> argv) override;
  std::vector<RedisReply> pipeline(const std::vector<RedisCommand>& commands) override;
  std::vector<RedisReply> urgent_pipeline(const std::vector<RedisCommand>& commands,
                                          std::chrono::steady_clock::time_point deadline) override;
  std::vector<RedisReply> urgent_pipeline_parts(std::span<const std::span<const std::string_view>> commands,
                                                std::chrono::steady_clock::time_point deadline) override;
  Subscription subscribe(const std::string& channel, MessageHandler on_message,
                         std::optional<std::chrono::milliseconds> confirm_within = std::nullopt) override;
  std::string endpoint() const override;
  bool may_vote() override;
  Millis sits_out_for() override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dlock
