// HiredisExecutor: commands and pipelines on pooled connections, a command started now and
// read later on a connection kept borrowed, renewals on the reserved one, pub/sub, resets.
#include "dlock/hiredis_executor.hpp"

#include "connection/master_watch.hpp"
#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"

#include <optional>
#include <utility>

namespace dlock {

HiredisExecutor::HiredisExecutor(RedisConfig config)
    : pool_(config),
      urgent_(config),
      watch_(std::make_unique<detail::MasterWatch>(detail::MasterWatch::Masters{
          .list = [master = detail::WatchedMaster{pool_.endpoint(), config}] { return std::vector{master}; },
          .look_again = nullptr})),  // one server, found where it is
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

namespace {

// A command sent on a borrowed connection, which stays borrowed until its reply is read.
class PooledPendingReply final : public PendingReply {
 public:
  PooledPendingReply(detail::ConnectionPool::Lease connection, std::chrono::steady_clock::time_point deadline)
      : connection_(std::move(connection)), deadline_(deadline) {}
  ~PooledPendingReply() override {
    if (!read_) connection_->abandon();  // its reply would be the next borrower's
  }
  RedisReply get(std::chrono::steady_clock::time_point give_up_at) override {
    if (arrived_) return std::move(*std::exchange(arrived_, std::nullopt));
    read_ = true;
    return connection_->receive(std::min(deadline_, give_up_at));
  }
  std::optional<RedisReply> take_if_arrived() override {
    if (!arrived_) {
      arrived_ = connection_->receive_if_arrived();
      read_ = arrived_.has_value();
    }
    return arrived_;
  }
  // take_if_arrived() drains what TLS holds decrypted before any poll(), so the socket is what to watch.
  int ready_fd() const override { return connection_->fd(); }
  std::chrono::steady_clock::time_point due() const override { return deadline_; }

 private:
  detail::ConnectionPool::Lease connection_;
  const std::chrono::steady_clock::time_point deadline_;
  bool read_ = false;
  std::optional<RedisReply> arrived_;  // taken by take_if_arrived, not yet by get
};

}  // namespace

std::unique_ptr<PendingReply> HiredisExecutor::start(std::span<const std::string_view> argv) {
  auto connection = pool_.borrow();
  const auto deadline = connection->send_command(argv);
  return std::make_unique<PooledPendingReply>(std::move(connection), deadline);
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

Subscription HiredisExecutor::watch_resets(ResetHandler on_reset) { return watch_->watch(std::move(on_reset)); }

}  // namespace dlock
