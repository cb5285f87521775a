// The Sentinel executor's calls on the master: a READONLY refusal sent once more to a new
// master; a failed connection reported to the tracker, so the next call finds the master anew.
#include "dlock/sentinel_executor.hpp"

#include <algorithm>

#include "connection/master_watch.hpp"
#include "dlock/errors.hpp"
#include "sentinel/master_discovery.hpp"
#include "sentinel/master_tracker.hpp"

namespace dlock {
namespace {

RedisConfig dialling(RedisConfig config, std::shared_ptr<detail::MasterTracker> tracker) {
  config.endpoint_source = std::move(tracker);
  return config;
}

bool refused_by_replica(const RedisReply& reply) {
  return reply.is_error() && detail::is_readonly_refusal(reply.str);
}

bool refused_by_replica(const std::vector<RedisReply>& replies) {
  return std::any_of(replies.begin(), replies.end(), [](const RedisReply& reply) { return refused_by_replica(reply); });
}

}  // namespace

SentinelExecutor::SentinelExecutor(RedisConfig config)
    : master_name_(config.sentinel.master_name),
      tracker_(std::make_shared<detail::MasterTracker>(config)),
      master_(dialling(config, tracker_)),
      watch_(std::make_unique<detail::MasterWatch>(detail::MasterWatch::Masters{
          // One name whatever its address: a move is told by the run_id its connection then finds.
          .list = [master = detail::WatchedMaster{"master '" + master_name_ + "'", dialling(config, tracker_)}] {
            return std::vector{master};
          },
          .look_again = [tracker = tracker_] { tracker->suspect(); }})) {
  tracker_->start_following();
}

SentinelExecutor::~SentinelExecutor() = default;

void SentinelExecutor::connect() {
  (void)tracker_->next();  // the Sentinels' verdict, with its own message, before the master's PING
  master_.connect();
}

template <typename Call>
auto SentinelExecutor::on_master(Call&& call) {
  const std::uint64_t epoch = tracker_->epoch();
  try {
    auto result = call();
    if (!refused_by_replica(result)) return result;
    // A replica refuses a write before making it (a script, before its
    // first write), so sending it to the new master is safe.
    if (tracker_->look_again(epoch)) {
      result = call();
      if (!refused_by_replica(result)) return result;
    }
    throw ConnectionError("redis " + endpoint() + ": the master '" + master_name_ +
                          "' was demoted (READONLY) and the Sentinels name no new master yet; nothing was "
                          "written; a failover takes seconds: a wait (LockOptions::wait, lock.wait_ms) covers it");
  } catch (const ConnectionError&) {
    // Not sent again: the command may have run. The next call goes to the master found meanwhile.
    tracker_->suspect();
    throw;
  }
}

RedisReply SentinelExecutor::command(const RedisCommand& argv) {
  return on_master([&] { return master_.command(argv); });
}

RedisReply SentinelExecutor::command_parts(std::span<const std::string_view> argv) {
  return on_master([&] { return master_.command_parts(argv); });
}

std::vector<RedisReply> SentinelExecutor::pipeline(const std::vector<RedisCommand>& commands) {
  return on_master([&] { return master_.pipeline(commands); });
}

std::vector<RedisReply> SentinelExecutor::urgent_pipeline(const std::vector<RedisCommand>& commands,
                                                          std::chrono::steady_clock::time_point deadline) {
  // Renewals have a deadline: the Sentinels are asked on the following
  // thread, never here, and the next round goes wherever the master is then.
  try {
    auto replies = master_.urgent_pipeline(commands, deadline);
    if (!refused_by_replica(replies)) return replies;
    throw ConnectionError("redis " + endpoint() + ": the master '" + master_name_ +
                          "' was demoted (READONLY); renewing again on the master the Sentinels name next");
  } catch (const ConnectionError&) {
    tracker_->suspect();
    throw;
  }
}

Subscription SentinelExecutor::subscribe(const std::string& channel, MessageHandler on_message,
                                         std::optional<std::chrono::milliseconds> confirm_within) {
  return master_.subscribe(channel, std::move(on_message), confirm_within);
}

Subscription SentinelExecutor::watch_resets(ResetHandler on_reset) { return watch_->watch(std::move(on_reset)); }

std::string SentinelExecutor::endpoint() const {
  const auto master = tracker_->known_master();
  return master ? to_string(*master) : "(master '" + master_name_ + "', not found yet)";
}

}  // namespace dlock
