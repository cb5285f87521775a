#include "dlock/hiredis_executor.hpp"

#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"

namespace dlock {

HiredisExecutor::HiredisExecutor(RedisConfig config)
    : pool_(config),
      urgent_(config),
      subscriber_(std::make_unique<detail::Subscriber>(std::move(config))),
      generation_(detail::fork_generation()) {}

HiredisExecutor::~HiredisExecutor() {
  // In a fork child the subscriber's thread does not exist: joining it would
  // never return. Its memory and socket are left to the process's exit.
  if (forked()) (void)subscriber_.release();
}

bool HiredisExecutor::forked() const { return generation_ != detail::fork_generation(); }

void HiredisExecutor::connect() {
  auto connection = pool_.borrow();
  detail::check_pong(connection->command({"PING"}), endpoint(), "redis.host and redis.port point at a usable redis-server");
}

RedisReply HiredisExecutor::command(const RedisCommand& argv) {
  auto connection = pool_.borrow();
  return connection->command(argv);
}

RedisReply HiredisExecutor::command_parts(std::span<const std::string_view> argv) {
  auto connection = pool_.borrow();
  return connection->command(argv);
}

std::vector<RedisReply> HiredisExecutor::pipeline(const std::vector<RedisCommand>& commands) {
  auto connection = pool_.borrow();
  return connection->pipeline(commands);
}

std::vector<RedisReply> HiredisExecutor::urgent_pipeline(const std::vector<RedisCommand>& commands,
                                                         std::chrono::steady_clock::time_point deadline) {
  return urgent_.pipeline(commands, deadline);
}

Subscription HiredisExecutor::subscribe(const std::string& channel, MessageHandler on_message,
                                        std::optional<std::chrono::milliseconds> confirm_within) {
  if (forked()) {
    detail::refuse_subscribing_after_fork(endpoint(), channel);
  }
  return subscriber_->subscribe(channel, std::move(on_message), confirm_within);
}

std::string HiredisExecutor::endpoint() const { return pool_.endpoint(); }

}  // namespace dlock
