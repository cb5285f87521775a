// Redis' error replies told to an operator: "not now" (exit 69) told from "no" (exit 76),
// the advice for each kind, and a refused write traced to a read-only replica.
#include "redis_refusal.hpp"

#include "dlock/detail/transient_state.hpp"
#include "dlock/errors.hpp"
#include "dlock/factory.hpp"
#include "node_reads.hpp"

namespace dlock::cli {

namespace {

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

}  // namespace

bool refused_for_now(const std::string& answer) { return !detail::transient_state(answer).empty(); }

std::string refusal_advice(const std::string& message) {
  // "Not now" rather than "no": the same command succeeds once the state passes.
  if (refused_for_now(message)) {
    return std::string(detail::kTransientStateAdvice);
  }
  // A replica, or a master demoted during a failover, refuses every write.
  if (contains(message, "READONLY")) {
    return "that Redis is a read-only replica (READONLY), not the master; point redis.host/redis.port "
           "(or redis.url) at the master";
  }
  // Redis 7 words a script's refused command "...can't run this command or subcommand".
  if (contains(message, "NOPERM") || contains(message, "can't run this command")) {
    return "the Redis user lacks a right (NOPERM); grant it the ACL in the README's 'Running as a restricted "
           "Redis user' (dlock status, list and unlock --force also need +hgetall, and +smembers and +hget for "
           "read-write locks' and semaphores' holders; list needs +scan and +zcard)";
  }
  if (contains(message, "WRONGTYPE")) {
    return "a Redis name of this lock holds data of another type, not a dlock lock; another program uses "
           "that name: delete it or choose another lock.key_prefix";
  }
  return "";
}

std::string describe_refusal(const std::string& endpoint, const std::string& what, const std::string& answer) {
  const std::string advice = refusal_advice(answer);
  return "redis " + endpoint + ": " + what + ": Redis answered " + answer + (advice.empty() ? "" : "; " + advice);
}

void throw_refusal(const std::string& endpoint, const std::string& what, const std::string& answer) {
  if (refused_for_now(answer)) throw ConnectionError(describe_refusal(endpoint, what, answer));  // exit 69
  throw RedisError(describe_refusal(endpoint, what, answer));
}

Refusal refusal_of(const std::string& endpoint, const std::string& what, const RedisReply& reply) {
  const std::string answer = reply.is_error() ? reply.str : std::string("an unexpected reply");
  return {describe_refusal(endpoint, what, answer), reply.is_error() && refused_for_now(reply.str)};
}

void throw_refusal(const Refusal& refusal) {
  if (refusal.for_now) throw ConnectionError(refusal.error);  // exit 69
  throw RedisError(refusal.error);
}

void rethrow_if_replica(const RedisConfig& config, const std::string& what) {
  std::string replicas;  // "host:port" of each server that said it is one
  try {
    const auto probe_executor = make_executor(config, false);
    RedisExecutor& probe = *probe_executor;
    // A Redlock's nodes each: a replica among them refuses its part of every write.
    const std::vector<RedisExecutor*> nodes = probe.quorum_nodes();
    const std::vector<NodeReplies> roles = pipeline_on_each_node(probe, {{"ROLE"}});
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
    throw RedisError("redis " + replicas + ": " + what + ": " + refusal_advice("READONLY"));
  }
  throw RedisError("redlock node(s) " + replicas + ": " + what + ": a read-only replica, not a master; a Redlock's "
                   "nodes must be independent masters: list only masters in redis.redlock.nodes");
}

}  // namespace dlock::cli
