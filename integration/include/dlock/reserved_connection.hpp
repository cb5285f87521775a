#pragma once
// One connection kept out of the pool for the watchdog's renewals: they never
// wait for a pooled connection behind user traffic, and each call gives up at
// a deadline (the earliest moment a held lock would count as lost), however
// long the configured connect and command timeouts are.

#include <chrono>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "dlock/redis_connection.hpp"

namespace dlock::detail {

class ReservedConnection {
 public:
  explicit ReservedConnection(RedisConfig config);

  // Connects on first use (or after a failure, or once the server closed it). Throws ConnectionError when
  // the deadline passes first, or the connection fails; it is then dropped.
  std::vector<RedisReply> pipeline(const std::vector<RedisCommand>& commands,
                                   std::chrono::steady_clock::time_point deadline);
  // As above, the commands' parts views of the caller's strings (the watchdog's renewals, uncopied).
  std::vector<RedisReply> pipeline(std::span<const std::span<const std::string_view>> commands,
                                   std::chrono::steady_clock::time_point deadline);

 private:
  template <typename Commands>
  std::vector<RedisReply> run(const Commands& commands, std::chrono::steady_clock::time_point deadline);

  const RedisConfig config_;
  // Only the watchdog's renewer uses it, one call at a time: never contended.
  std::mutex mutex_;
  std::unique_ptr<RedisConnection> connection_;  // guarded by mutex_
};

}  // namespace dlock::detail
