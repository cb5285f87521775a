#pragma once
// `dlock unlock --force KEY`: the library's forced-release script run on the
// lock, on one Redis or on every node of a Redlock, and what it did. Over a
// Redlock each node answers for itself (one restarted empty removes nothing,
// another holds a different hold count), so what was done is told owner by
// owner, by how many nodes removed it: an owner a majority of the nodes held
// was the lock's holder.

#include <cstddef>
#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::cli {

struct RemovedOwner {
  std::string token;
  long long hold_count = 0;  // the largest any node held
  std::size_t nodes = 0;     // how many nodes removed it
};

struct ForcedUnlock {
  std::vector<RemovedOwner> owners;  // every owner any node removed
  std::size_t nodes = 1;             // nodes asked (1 off a Redlock)
  std::size_t answered = 0;          // nodes that said what they removed

  bool quorum() const { return nodes > 1; }
  // Whether `owner` may have held the lock: a majority of the nodes removed
  // it, or would have, counting the nodes that did not answer.
  bool may_have_held(const RemovedOwner& owner) const;
  // Whether a majority of the nodes removed `owner`: it held the lock.
  bool held_on_majority(const RemovedOwner& owner) const;
  bool majority_answered() const;
};

// Runs the forced release of `key`'s lock. Throws RedisError for a refusal
// (on a Redlock, one a majority gave alike) and ConnectionError when Redis
// cannot be reached; on a Redlock whose majority did not answer, returns what
// the others did (majority_answered() false).
ForcedUnlock force_unlock(RedisExecutor& redis, const LockConfig& config, const std::string& key);

}  // namespace dlock::cli
