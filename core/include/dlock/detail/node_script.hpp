#pragma once
// An inspection script (or the forced release) run where a lock lives: on one Redis, or on
// each node of a Redlock (redis.mode: redlock), every node's reply kept apart
// for the quorum's rules (quorum_status.hpp, forced_unlock.hpp) to decide.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "dlock/detail/loaded_script.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::detail {

class NodeScript {
 public:
  // Loads `source` (see LoadedScript). On a Redlock, a node that cannot be
  // reached or refuses the script is skipped; a majority must load it (else
  // ConnectionError, or the refusal a majority gave as RedisError).
  NodeScript(RedisExecutor& redis, const std::string& source, const std::string& purpose);

  bool quorum() const { return quorum_; }
  std::size_t nodes() const { return scripts_.size(); }

  // One reply per node (one in all off a Redlock), the nodes asked at once.
  // On a Redlock, nothing for a node that could not be reached; elsewhere a
  // ConnectionError is thrown.
  std::vector<std::optional<RedisReply>> run(const std::vector<std::string>& keys,
                                             const std::vector<std::string>& args = {});

 private:
  bool quorum_ = false;
  std::vector<std::optional<LoadedScript>> scripts_;
};

}  // namespace dlock::detail
