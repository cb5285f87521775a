#pragma once
// An inspection script (inspection_scripts.hpp), run on one Redis outside the
// lock service's ScriptRunner (which combines a Redlock's replies by the lock
// scripts' rules), sent the way the library sends its own:
// SCRIPT LOAD, then EVALSHA. So a Redis user with docs/operations.md's ACL (which
// grants those two, not EVAL) may run it.

#include <string>
#include <vector>

#include "dlock/redis_executor.hpp"

namespace dlock::detail {

class LoadedScript {
 public:
  // Loads `source`; throws RedisError (see redis_refusal.hpp) if Redis refuses.
  LoadedScript(RedisExecutor& redis, const std::string& source, const std::string& purpose);

  // Runs it; an error reply comes back as such. Loads it again once after a
  // NOSCRIPT (Redis restarted or flushed its scripts meanwhile).
  RedisReply run(const std::vector<std::string>& keys, const std::vector<std::string>& args = {});

 private:
  void load();

  RedisExecutor& redis_;
  std::string source_;
  std::string purpose_;  // for messages: "read the lock"
  std::string sha_;
};

}  // namespace dlock::detail
