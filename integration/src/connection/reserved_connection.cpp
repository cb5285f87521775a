// The watchdog's reserved connection: one pipeline at a time, every wait cut to the
// renewal's deadline, and a connection that failed mid-pipeline never used again.
#include "dlock/reserved_connection.hpp"

#include <algorithm>

#include "dlock/errors.hpp"

namespace dlock::detail {

ReservedConnection::ReservedConnection(RedisConfig config) : config_(std::move(config)) {}

std::vector<RedisReply> ReservedConnection::pipeline(const std::vector<RedisCommand>& commands,
                                                     std::chrono::steady_clock::time_point deadline) {
  return run(commands, deadline);
}

std::vector<RedisReply> ReservedConnection::pipeline(std::span<const std::span<const std::string_view>> commands,
                                                     std::chrono::steady_clock::time_point deadline) {
  return run(commands, deadline);
}

template <typename Commands>
std::vector<RedisReply> ReservedConnection::run(const Commands& commands,
                                                std::chrono::steady_clock::time_point deadline) {
  const auto too_late = [&] {
    return ConnectionError("redis " + config_.host + ":" + std::to_string(config_.port) +
                           ": no answer before the renewal's deadline; the locks it renews count as lost by the "
                           "local clock if none comes in time");
  };
  std::lock_guard guard(mutex_);
  const auto left = std::chrono::ceil<Millis>(deadline - std::chrono::steady_clock::now());
  if (left <= Millis(0)) throw too_late();
  try {
    // One the server closed since the last round (a restart, CLIENT KILL) is dialled
    // anew here: the round after a restart must not fail on the old socket.
    if (!connection_ || connection_->closed_while_idle()) {
      connection_.reset();
      RedisConfig bounded = config_;
      bounded.connect_timeout = std::min(config_.connect_timeout, left);
      bounded.command_timeout = std::min(config_.command_timeout, left);
      connection_ = std::make_unique<RedisConnection>(bounded);
    }
    connection_->set_command_timeout(
        std::min(config_.command_timeout,
                 std::max(Millis(1), std::chrono::ceil<Millis>(deadline - std::chrono::steady_clock::now()))));
    return connection_->pipeline(commands, deadline);
  } catch (...) {
    // A connection that failed or timed out mid-pipeline is one reply behind: never reuse it.
    connection_.reset();
    throw;
  }
}

}  // namespace dlock::detail
