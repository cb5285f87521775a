#pragma once
// RedisExecutor over hiredis: a ConnectionPool for commands and pipelines, a
// connection of its own for the watchdog's renewals, a Subscriber for pub/sub,
// and, once the watchdog asks (watch_resets), a MasterWatch that tells it when
// the server restarted. Callers on different threads use different pooled
// connections, so the executor never serialises them.
//
// After fork(), a child may go on using an executor its parent made for
// commands and pipelines: it opens connections of its own and never touches
// the parent's sockets. Pub/sub cannot follow: the subscriber's thread did
// not survive the fork, so subscribe() in the child throws ConnectionError
// (create a new executor, or service, in the child instead).

#include <memory>

#include "dlock/config.hpp"
#include "dlock/connection_pool.hpp"
#include "dlock/redis_executor.hpp"
#include "dlock/reserved_connection.hpp"
#include "dlock/subscriber.hpp"

namespace dlock {

namespace detail {
class MasterWatch;
}

class HiredisExecutor final : public RedisExecutor {
 public:
  explicit HiredisExecutor(RedisConfig config);
  ~HiredisExecutor() override;
  HiredisExecutor(const HiredisExecutor&) = delete;
  HiredisExecutor& operator=(const HiredisExecutor&) = delete;

  // Opens one connection and PINGs, so a wrong address or password fails at
  // start-up: throws ConnectionError.
  void connect();

  RedisReply command(const RedisCommand& argv) override;
  RedisReply command_parts(std::span<const std::string_view> argv) override;
  std::unique_ptr<PendingReply> start(std::span<const std::string_view> argv) override;
  std::vector<RedisReply> pipeline(const std::vector<RedisCommand>& commands) override;
  std::vector<RedisReply> urgent_pipeline(const std::vector<RedisCommand>& commands,
                                          std::chrono::steady_clock::time_point deadline) override;
  std::vector<RedisReply> urgent_pipeline_parts(std::span<const std::span<const std::string_view>> commands,
                                                std::chrono::steady_clock::time_point deadline) override;
  Subscription subscribe(const std::string& channel, MessageHandler on_message,
                         std::optional<std::chrono::milliseconds> confirm_within = std::nullopt) override;
  std::string endpoint() const override;
  Subscription watch_resets(ResetHandler on_reset) override;

  // How many connections the pool has opened so far: a change means a
  // command may have reached a server that restarted meanwhile.
  std::uint64_t connections_opened() const { return pool_.opened(); }

 private:
  bool forked() const;  // whether this process is a fork child of the one that made the executor

  detail::ConnectionPool pool_;
  detail::ReservedConnection urgent_;  // the watchdog's, outside the pool
  std::unique_ptr<detail::MasterWatch> watch_;
  std::unique_ptr<detail::Subscriber> subscriber_;
  const unsigned generation_;  // fork_generation() when made
};

}  // namespace dlock
