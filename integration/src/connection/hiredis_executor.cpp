// HiredisExecutor: commands and pipelines on pooled connections, a command started now and
// read later on a connection kept borrowed, renewals on the reserved one, pub/sub, resets.
#include "dlock/hiredis_executor.hpp"

#include "connection/master_watch.hpp"
#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"

#include <optional>
#include <vector>
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
// After then(), the replies of the commands before it come first, each by its own deadline, and are discarded.
class PooledPendingReply final : public PendingReply {
 public:
  using Clock = std::chrono::steady_clock;
  // `kept`: how many replies come before the one to keep for earlier(), if any.
  PooledPendingReply(detail::ConnectionPool::Lease connection, std::vector<Clock::time_point> deadlines,
                     std::optional<std::size_t> kept = std::nullopt)
      : connection_(std::move(connection)), deadlines_(std::move(deadlines)), kept_(kept) {}
  ~PooledPendingReply() override {
    if (!read_ && !handed_on_) connection_->abandon();  // its reply would be the next borrower's
  }
  RedisReply get(Clock::time_point give_up_at) override {
    if (arrived_) return std::move(*std::exchange(arrived_, std::nullopt));
    read_ = true;
    for (; deadlines_.size() > 1; deadlines_.erase(deadlines_.begin())) {
      keep(connection_->receive(std::min(deadlines_.front(), give_up_at)));
    }
    return connection_->receive(std::min(deadlines_.front(), give_up_at));
  }
  std::optional<RedisReply> take_if_arrived() override {
    if (!arrived_) {
      for (; deadlines_.size() > 1; deadlines_.erase(deadlines_.begin())) {
        std::optional<RedisReply> reply = connection_->receive_if_arrived();
        if (!reply) return std::nullopt;
        keep(std::move(*reply));
      }
      arrived_ = connection_->receive_if_arrived();
      read_ = arrived_.has_value();
    }
    return arrived_;
  }
  // take_if_arrived() drains what TLS holds decrypted before any poll(), so the socket is what to watch.
  int ready_fd() const override { return connection_->fd(); }
  Clock::time_point due() const override { return deadlines_.front(); }
  std::unique_ptr<PendingReply> then(std::span<const std::string_view> argv, bool undoing) override {
    // A paused server's socket buffers fill up: past a few, the caller looks
    // elsewhere. Not for a release or a give-back, which must reach the node
    // (skipped, it would leave a grant nobody holds for a lease).
    constexpr std::size_t kMostOwed = 16;
    if (!undoing && deadlines_.size() >= kMostOwed) return nullptr;
    std::vector<Clock::time_point> deadlines;
    if (!arrived_) deadlines = deadlines_;
    deadlines.push_back(connection_->send_command(argv));
    handed_on_ = true;
    return std::make_unique<PooledPendingReply>(std::move(connection_), std::move(deadlines));
  }
  std::unique_ptr<PendingReply> then_keeping(std::span<const std::string_view> argv) override {
    // This reply is still to come (a kept one taken by take_if_arrived() is the caller's already).
    // A broken connection carries nothing more: the caller reads this reply, then runs its command anywhere.
    if (arrived_ || read_ || connection_->broken()) return nullptr;
    std::vector<Clock::time_point> deadlines = deadlines_;
    const std::size_t before = deadlines.size() - 1;
    deadlines.push_back(connection_->send_command(argv));
    handed_on_ = true;
    return std::make_unique<PooledPendingReply>(std::move(connection_), std::move(deadlines), before);
  }
  std::optional<RedisReply> earlier() override { return std::move(earlier_); }

 private:
  // A reply read on the way to this one: kept if it is the one then_keeping() asked for.
  void keep(RedisReply reply) {
    if (kept_ && *kept_ == 0) earlier_ = std::move(reply);
    if (kept_) kept_ = *kept_ == 0 ? std::nullopt : std::optional<std::size_t>(*kept_ - 1);
  }

  detail::ConnectionPool::Lease connection_;
  std::vector<Clock::time_point> deadlines_;  // of the replies still to come, this one's last
  bool read_ = false;
  bool handed_on_ = false;  // then() moved the connection on
  std::optional<RedisReply> arrived_;  // taken by take_if_arrived, not yet by get
  std::optional<std::size_t> kept_;    // replies still to read before the one earlier() gives
  std::optional<RedisReply> earlier_;
};

}  // namespace

std::unique_ptr<PendingReply> HiredisExecutor::start(std::span<const std::string_view> argv) {
  auto connection = pool_.borrow();
  const auto deadline = connection->send_command(argv);
  return std::make_unique<PooledPendingReply>(std::move(connection), std::vector{deadline});
}

std::vector<RedisReply> HiredisExecutor::pipeline(const std::vector<RedisCommand>& commands) {
  auto connection = pool_.borrow();
  return connection->pipeline(commands);
}

std::vector<RedisReply> HiredisExecutor::urgent_pipeline(const std::vector<RedisCommand>& commands,
                                                         std::chrono::steady_clock::time_point deadline) {
  return urgent_.pipeline(commands, deadline);
}

std::vector<RedisReply> HiredisExecutor::urgent_pipeline_parts(
    std::span<const std::span<const std::string_view>> commands, std::chrono::steady_clock::time_point deadline) {
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
