// rethrow_if_replica: a RedisError from the library traced, by ROLE, to a read-only
// replica (or a Redlock node that is one).
#include "replica_check.hpp"

#include "dlock/detail/node_reads.hpp"
#include "dlock/detail/redis_refusal.hpp"
#include "dlock/errors.hpp"
#include "dlock/factory.hpp"

namespace dlock::cli {

void rethrow_if_replica(const RedisConfig& config, const std::string& what) {
  std::string replicas;  // "host:port" of each server that said it is one
  try {
    const auto probe_executor = make_executor(config, false);
    RedisExecutor& probe = *probe_executor;
    // A Redlock's nodes each: a replica among them refuses its part of every write.
    const std::vector<RedisExecutor*> nodes = probe.quorum_nodes();
    const std::vector<detail::NodeReplies> roles = detail::pipeline_on_each_node(probe, {{"ROLE"}});
    for (std::size_t i = 0; i < roles.size(); ++i) {
      const RedisReply* role = roles[i] ? &roles[i]->front() : nullptr;
      if (!role || role->is_error() || role->elements.empty() || role->elements.front().str != "slave") continue;
      const std::string endpoint =
          nodes.empty() ? config.host + ":" + std::to_string(config.port) : nodes[i]->endpoint();
      replicas += (replicas.empty() ? "" : ", ") + endpoint;
    }
  } catch (const Error&) {
    // Unreachable now, or ROLE not granted: the original error stands.
  }
  if (replicas.empty()) throw;
  if (config.mode != RedisMode::redlock) {
    throw RedisError("redis " + replicas + ": " + what + ": " + detail::refusal_advice("READONLY"));
  }
  throw RedisError("redlock node(s) " + replicas + ": " + what + ": a read-only replica, not a master; a Redlock's "
                   "nodes must be independent masters: list only masters in redis.redlock.nodes");
}

}  // namespace dlock::cli
