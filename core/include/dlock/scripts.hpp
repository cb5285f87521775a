#pragma once
// The Lua scripts that make a lock atomic, and the runner that sends
// them by EVALSHA. Every user value travels in KEYS/ARGV, never in the text.
//
// Reply shapes (the core parses them in lock_service.cpp):
//   acquire(lock, fence, queue, turn; owner, lease_ms, wait_ms, holds known to the caller)
//       → {1, holds, fencing_token as a decimal string} | {0, ms the caller may sleep at most}
//   release(lock, channel, queue, turn[, fence]; owner, lease_ms, window_ms[, candidate, its lease_ms, may_bypass])
//       → {-1, 0, ''} not owner | {1, holds left, ''}
//         | {0, 0, next owner or '', ''} freed and published
//         | {0, 0, candidate, its fencing token} handed straight to the candidate
//   renew(lock; owner, lease_ms) → 1 renewed | 0 gone
//   leave(queue, turn, channel[, lock]; owner, window_ms) → 1 (also frees a hold granted to it unawares)
// A key of the wrong type at a lock's name is an error reply starting "DLOCK_WRONGTYPE".
//
// Waiters line up in the sorted set `queue` (owner token by arrival). A final
// release hands the next turn to the oldest of them: `turn` holds its token
// for a short window in which nobody else may take the free lock, and the
// release notice names it, so exactly that waiter wakes. A waiter that died
// only costs that window; one that gives up leaves the line (leave script).
// A releaser with a waiter of its own process asleep in line may instead
// grant the lock to it inside the release (it is known to be alive), at most
// a few times in a row ahead of older waiters of other processes.

#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/redis_executor.hpp"

namespace dlock::detail {

struct Script {
  std::string_view name;
  std::string source;
};

extern const Script kAcquireScript;
extern const Script kReleaseScript;
extern const Script kRenewScript;
extern const Script kLeaveScript;

// Error replies of the scripts start with this, then the key's actual type.
inline constexpr std::string_view kWrongTypeError = "DLOCK_WRONGTYPE";

// Runs scripts by SHA. The SHA of each script is learnt from SCRIPT LOAD;
// after a NOSCRIPT (Redis restarted, SCRIPT FLUSH) the script is loaded again
// and the call retried once. Thread-safe.
class ScriptRunner {
 public:
  explicit ScriptRunner(RedisExecutor& redis) : redis_(redis) {}

  // Loads every script now; throws ConnectionError when Redis is unreachable.
  void load_all();

  RedisReply run(const Script& script, std::span<const std::string_view> keys, std::span<const std::string_view> args);

  // One round trip for many calls of the same script (the watchdog's renewals).
  std::vector<RedisReply> run_pipelined(const Script& script,
                                        const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>& calls);

 private:
  // Views that stay valid as long as the runner.
  std::string_view sha_of(const Script& script);
  std::string_view load(const Script& script);
  static RedisCommand evalsha(std::string_view sha, const std::vector<std::string>& keys,
                              const std::vector<std::string>& args);
  static bool is_noscript(const RedisReply& reply);

  RedisExecutor& redis_;
  std::mutex mutex_;
  std::map<const Script*, std::string> shas_;  // guarded by mutex_; an entry, once made, never changes
};

}  // namespace dlock::detail
