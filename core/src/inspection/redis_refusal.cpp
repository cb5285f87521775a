// Redis' error replies told to an operator: "not now" (ConnectionError, exit 69) told from
// "no" (RedisError, exit 76), and the advice for each kind.
#include "dlock/detail/redis_refusal.hpp"

#include "dlock/detail/transient_state.hpp"
#include "dlock/errors.hpp"

namespace dlock::detail {

namespace {

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

}  // namespace

bool refused_for_now(const std::string& answer) { return !transient_state(answer).empty(); }

std::string refusal_advice(const std::string& message) {
  // "Not now" rather than "no": the same command succeeds once the state passes.
  if (refused_for_now(message)) {
    return std::string(kTransientStateAdvice);
  }
  // A replica, or a master demoted during a failover, refuses every write.
  if (contains(message, "READONLY")) {
    return "that Redis is a read-only replica (READONLY), not the master; point redis.host/redis.port "
           "(or redis.url) at the master";
  }
  // Redis 7 words a script's refused command "...can't run this command or subcommand".
  if (contains(message, "NOPERM") || contains(message, "can't run this command")) {
    return "the Redis user lacks a right (NOPERM); grant it the ACL in docs/operations.md's 'Running as a "
           "restricted Redis user' (dlock status, list and unlock --force also need +hgetall, and +smembers and "
           "+hget for read-write locks' and semaphores' holders; list needs +scan and +zcard)";
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

}  // namespace dlock::detail
