#pragma once
// RedisExecutor over a Redis Cluster (redis.mode: cluster).
//
// Routing: every command goes to the master serving the hash slot of its key
// (an EVAL/EVALSHA's first key, else argv[1]); SCRIPT LOAD and SCRIPT FLUSH
// go to every master; keyless commands (PING, TIME, INFO, ROLE, ...) to any
// master. The slot map is local (CLUSTER SLOTS, read at connect()), so
// routing costs no round trip; it is read again only when a node redirects
// (MOVED), stops answering, or says the cluster is down.
//
// Within the command timeout (the deadline, for urgent_pipeline) a command
// follows MOVED (the map is read again) and ASK (ASKING then the command, on
// the target, on one connection), waits out TRYAGAIN (a slot in migration)
// and CLUSTERDOWN, and retries a master it could not connect to (nothing was
// sent) after reading the map again: a failover in progress. At most 5
// redirections per command. A connection that fails once the command was
// sent is not retried here (the command may have run): ConnectionError, as
// with one server; the next call goes wherever the map now says.
//
// Pipelines are split by node and sent to the nodes in parallel; replies
// come back in the commands' order. A keyless command in a pipeline (WAIT)
// goes to the node of the keyed command just before it (or, first in the
// pipeline, just after it). When some nodes answered and another failed
// midway, that node's commands get the error reply "DLOCK_UNREACHABLE ..."
// and the others their replies; ConnectionError only when no node answered.
//
// Pub/sub is classic: in a cluster a PUBLISH reaches subscribers on every
// node, so the one subscriber connection goes to any node, and on to the next
// when its node dies (masters first, then replicas).
//
// A pool per node (redis.pool_size connections each) and, per node, one
// reserved connection for the watchdog's renewals.
//
// watch_resets: a connection of its own to each master tells a master that
// restarted, and a master that a failover promoted; while a master is
// unreachable the slot map is read again every 250 ms.

#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock {
namespace detail {
class ClusterTopology;
class MasterWatch;
class Subscriber;
struct CommandRoute;
}  // namespace detail

class ClusterExecutor final : public RedisExecutor {
 public:
  // Seeds are config.cluster.nodes (redis.host:redis.port if empty); every
  // node gets the rest of `config` (AUTH, timeouts, pool size). Dials nothing.
  explicit ClusterExecutor(RedisConfig config);
  ~ClusterExecutor() override;
  ClusterExecutor(const ClusterExecutor&) = delete;
  ClusterExecutor& operator=(const ClusterExecutor&) = delete;

  // Reads the slot map from the first seed that answers and PINGs a master,
  // so a wrong seed list or password fails at start-up: throws
  // ConnectionError naming each seed and what went wrong.
  void connect();

  RedisReply command(const RedisCommand& argv) override;
  RedisReply command_parts(std::span<const std::string_view> argv) override;
  std::vector<RedisReply> pipeline(const std::vector<RedisCommand>& commands) override;
  std::vector<RedisReply> urgent_pipeline(const std::vector<RedisCommand>& commands,
                                          std::chrono::steady_clock::time_point deadline) override;
  Subscription subscribe(const std::string& channel, MessageHandler on_message,
                         std::optional<std::chrono::milliseconds> confirm_within = std::nullopt) override;
  // "cluster host:port,..." (the seeds).
  std::string endpoint() const override;
  // The key's hash slot.
  std::uint32_t script_group(std::string_view key) const override;
  void for_each_master(const std::function<void(RedisExecutor& master)>& visit) override;
  Subscription watch_resets(ResetHandler on_reset) override;

 private:
  struct Unit;
  using Clock = std::chrono::steady_clock;

  RedisReply to_every_master(const RedisCommand& argv, bool urgent, Clock::time_point deadline);
  std::vector<RedisReply> split_pipeline(const std::vector<RedisCommand>& commands, bool urgent,
                                         Clock::time_point deadline);
  std::vector<RedisReply> run_unit(const std::vector<RedisCommand>& commands, const Unit& unit, bool urgent,
                                   Clock::time_point deadline);
  // Sends by `send(node, asking)` to the master of `route`, following
  // redirections; the reply at `head_at` is the keyed command's; `sha`, of an
  // EVALSHA, lets a NOSCRIPT be fixed on the node that said it.
  template <typename Result, typename Send>
  Result routed(const detail::CommandRoute& route, Clock::time_point deadline, bool urgent, Send&& send,
                std::size_t head_at, std::string_view sha);
  // Scripts loaded through this executor, so that a master that lacks one
  // (promoted, restarted, added) gets it when it answers NOSCRIPT.
  void remember_script(const std::string& sha, const std::string& source);
  std::optional<std::string> script_source(std::string_view sha) const;
  bool forked() const;

  const RedisConfig config_;
  mutable std::mutex scripts_mutex_;
  std::map<std::string, std::string, std::less<>> scripts_;  // guarded by scripts_mutex_: SHA → source
  std::unique_ptr<detail::ClusterTopology> topology_;  // before the subscriber, which dials its nodes
  std::unique_ptr<detail::Subscriber> subscriber_;
  std::unique_ptr<detail::MasterWatch> watch_;  // after the topology: its thread reads it
  const unsigned generation_;  // fork_generation() when made
};

}  // namespace dlock
