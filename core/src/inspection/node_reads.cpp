// Pipelines sent to every node of a Redlock at once, each node's replies kept apart, and
// the check that enough of them answered for an inspection to say anything.
#include "dlock/detail/node_reads.hpp"

#include <exception>
#include <string>

#include "dlock/detail/in_parallel.hpp"
#include "dlock/detail/quorum.hpp"
#include "dlock/errors.hpp"

namespace dlock::detail {

std::vector<NodeReplies> pipeline_on_each_node(RedisExecutor& redis, const std::vector<RedisCommand>& commands) {
  const std::vector<RedisExecutor*> nodes = redis.quorum_nodes();
  if (nodes.empty()) return {redis.pipeline(commands)};
  std::vector<NodeReplies> replies(nodes.size());
  // Each node on a thread of its own: a paused node costs the read one command timeout, not one per node.
  const auto failures = in_parallel(nodes.size(), [&](std::size_t i) {
    replies[i] = nodes[i]->pipeline(commands);
  });
  rethrow_unless_unreachable(failures);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (failures[i] || replies[i]->size() != commands.size()) replies[i].reset();
  }
  return replies;
}

void rethrow_unless_unreachable(const std::vector<std::exception_ptr>& failures) {
  for (const std::exception_ptr& failure : failures) {
    if (!failure) continue;
    try {
      std::rethrow_exception(failure);
    } catch (const ConnectionError&) {
      // That node is down or silent: the others decide.
    }
  }
}

std::vector<std::optional<RedisReply>> replies_at(const std::vector<NodeReplies>& replies, std::size_t k) {
  std::vector<std::optional<RedisReply>> at;
  at.reserve(replies.size());
  for (const NodeReplies& node : replies) {
    at.push_back(node && k < node->size() ? std::optional<RedisReply>((*node)[k]) : std::nullopt);
  }
  return at;
}

void require_majority_or_refusal(const std::vector<std::exception_ptr>& failures, const std::string& purpose) {
  std::size_t answered = 0, refused = 0;
  std::exception_ptr a_refusal;
  std::string refusal, last_failure;
  for (const std::exception_ptr& failure : failures) {
    if (!failure) {
      ++answered;
      continue;
    }
    try {
      std::rethrow_exception(failure);
    } catch (const RedisError& e) {
      ++refused;
      a_refusal = failure;
      refusal = e.what();
    } catch (const ConnectionError& e) {
      last_failure = e.what();
    }
  }
  // A refusal a majority gave is the operator's to fix, not an outage.
  if (refused >= majority_of(failures.size())) std::rethrow_exception(a_refusal);
  require_majority(answered, failures.size(), purpose, refusal.empty() ? last_failure : refusal);
}

void require_majority(std::size_t answered, std::size_t nodes, const std::string& purpose,
                      const std::string& last_failure) {
  if (answered >= majority_of(nodes)) return;
  throw ConnectionError("redlock: only " + std::to_string(answered) + " of " + std::to_string(nodes) +
                        " nodes could be reached to " + purpose + " (a majority is " +
                        std::to_string(majority_of(nodes)) + ")" +
                        (last_failure.empty() ? "" : "; last: " + last_failure) + "; try again once they answer");
}

}  // namespace dlock::detail
