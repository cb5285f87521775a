#pragma once
// An executor that hands every call to a HiredisExecutor, for a test that
// watches or breaks one kind of call: it overrides that one and keeps the rest.
// What it does not override takes RedisExecutor's defaults, as a user's
// executor would (command_parts and urgent_pipeline_parts copy their views).

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dlock/dlock.hpp"

namespace dlock::test {

class ForwardingExecutor : public dlock::RedisExecutor {
 public:
  explicit ForwardingExecutor(std::shared_ptr<dlock::HiredisExecutor> inner) : inner_(std::move(inner)) {}

  dlock::RedisReply command(const dlock::RedisCommand& argv) override { return inner_->command(argv); }
  std::vector<dlock::RedisReply> pipeline(const std::vector<dlock::RedisCommand>& commands) override {
    return inner_->pipeline(commands);
  }
  std::vector<dlock::RedisReply> urgent_pipeline(const std::vector<dlock::RedisCommand>& commands,
                                                 std::chrono::steady_clock::time_point deadline) override {
    return inner_->urgent_pipeline(commands, deadline);
  }
  dlock::Subscription subscribe(const std::string& channel, dlock::MessageHandler on_message,
                                std::optional<std::chrono::milliseconds> confirm_within) override {
    return inner_->subscribe(channel, std::move(on_message), confirm_within);
  }
  std::string endpoint() const override { return inner_->endpoint(); }

 protected:
  std::shared_ptr<dlock::HiredisExecutor> inner_;
};

}  // namespace dlock::test
