// RedisExecutor::start's default: the command run to the end at once and its reply kept,
// for executors that cannot send a command and read its reply later.
#include "dlock/redis_executor.hpp"

namespace dlock {

namespace {

// The reply of a command already run to the end.
class FinishedReply final : public PendingReply {
 public:
  explicit FinishedReply(RedisReply reply) : reply_(std::move(reply)) {}
  RedisReply get(std::chrono::steady_clock::time_point) override { return std::move(reply_); }

 private:
  RedisReply reply_;
};

}  // namespace

std::unique_ptr<PendingReply> RedisExecutor::start(std::span<const std::string_view> argv) {
  return std::make_unique<FinishedReply>(command_parts(argv));
}

}  // namespace dlock
