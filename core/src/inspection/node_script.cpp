// NodeScript: an inspection script loaded on every node it can reach (a majority at
// least) and run on all of them at once, each node's reply kept apart.
#include "dlock/detail/node_script.hpp"

#include <exception>
#include <utility>
#include <vector>

#include "dlock/detail/in_parallel.hpp"
#include "dlock/detail/quorum.hpp"
#include "dlock/errors.hpp"
#include "dlock/detail/node_reads.hpp"

namespace dlock::detail {

NodeScript::NodeScript(RedisExecutor& redis, const std::string& source, const std::string& purpose) {
  const std::vector<RedisExecutor*> nodes = redis.quorum_nodes();
  quorum_ = !nodes.empty();
  if (!quorum_) {
    scripts_.emplace_back(std::in_place, redis, source, purpose);
    return;
  }
  std::vector<std::exception_ptr> failures(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    try {
      scripts_.emplace_back(std::in_place, *nodes[i], source, purpose);
      continue;
    } catch (const RedisError&) {  // this node's user lacks a right, say: the others may do
      failures[i] = std::current_exception();
    } catch (const ConnectionError&) {
      failures[i] = std::current_exception();
    }
    scripts_.emplace_back(std::nullopt);
  }
  require_majority_or_refusal(failures, purpose);
}

std::vector<std::optional<RedisReply>> NodeScript::run(const std::vector<std::string>& keys,
                                                       const std::vector<std::string>& args) {
  if (!quorum_) return {scripts_.front()->run(keys, args)};
  std::vector<std::optional<RedisReply>> replies(scripts_.size());
  // Each node on a thread of its own: a paused node costs one command timeout, not one per node.
  const auto failures = in_parallel(scripts_.size(), [&](std::size_t i) {
    if (scripts_[i]) replies[i] = scripts_[i]->run(keys, args);
  });
  rethrow_unless_unreachable(failures);
  for (std::size_t i = 0; i < failures.size(); ++i) {
    if (failures[i]) replies[i].reset();
  }
  return replies;
}

}  // namespace dlock::detail
