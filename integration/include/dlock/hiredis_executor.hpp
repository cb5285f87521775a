#pragma once
// RedisExecutor over hiredis: a ConnectionPool for commands and pipelines, a
// Subscriber for pub/sub. Callers on different threads use different pooled
// connections, so the executor never serialises them.

#include <memory>

#include "dlock/config.hpp"
#include "dlock/connection_pool.hpp"
#include "dlock/redis_executor.hpp"
#include "dlock/subscriber.hpp"

namespace dlock {

class HiredisExecutor final : public RedisExecutor {
 public:
  explicit HiredisExecutor(RedisConfig config);

  // Opens one connection and PINGs, so a wrong address or password fails at
  // start-up: throws ConnectionError.
  void connect();

  RedisReply command(const RedisCommand& argv) override;
  RedisReply command_parts(std::span<const std::string_view> argv) override;
  std::vector<RedisReply> pipeline(const std::vector<RedisCommand>& commands) override;
  Subscription subscribe(const std::string& channel, MessageHandler on_message) override;
  std::string endpoint() const override;

 private:
  detail::ConnectionPool pool_;
  detail::Subscriber subscriber_;
};

}  // namespace dlock
