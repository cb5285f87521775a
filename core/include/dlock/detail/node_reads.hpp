#pragma once
// Reads sent to every node of a Redlock at once, each node's answer kept
// apart. The nodes' replies differ (in PTTLs, hold counts, a node that
// restarted empty) even while a majority agrees on who holds a lock, so the
// inspection applies the quorum's rules to them itself (quorum_status.hpp)
// rather than taking one node's reply for the Redlock's.

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// One node's replies; none for a node that could not be reached (or timed out).
using NodeReplies = std::optional<std::vector<RedisReply>>;

// `commands` in one pipeline on each of `redis`'s quorum nodes, all at once.
// Off a Redlock, the one pipeline on `redis` (a Cluster splits it by slot),
// its ConnectionError thrown. Never fewer elements than nodes.
std::vector<NodeReplies> pipeline_on_each_node(RedisExecutor& redis, const std::vector<RedisCommand>& commands);

// Of jobs run on every node at once (in_parallel), rethrows the
// first failure that is not a ConnectionError: a node down or silent is the
// quorum's to decide, anything else is not.
void rethrow_unless_unreachable(const std::vector<std::exception_ptr>& failures);

// Of `replies`, the k-th reply of each node (none where a node has none).
std::vector<std::optional<RedisReply>> replies_at(const std::vector<NodeReplies>& replies, std::size_t k);

// Throws ConnectionError, naming `purpose`, unless a majority of a Redlock's
// `nodes` answered (a lock held by a majority is then seen by at least one).
void require_majority(std::size_t answered, std::size_t nodes, const std::string& purpose,
                      const std::string& last_failure);

// Of a job run on each of a Redlock's nodes (one failure or none each): a
// node that refused it (RedisError: a right missing on that node, say) is
// passed over as one down is, unless a majority refused: that refusal is
// the operator's to fix, and is thrown. Else ConnectionError unless a
// majority answered (require_majority). Any other failure is rethrown.
void require_majority_or_refusal(const std::vector<std::exception_ptr>& failures, const std::string& purpose);

}  // namespace dlock::detail
