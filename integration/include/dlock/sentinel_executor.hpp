#pragma once
// RedisExecutor for a master watched by Redis Sentinel (redis.mode:
// sentinel). It is a HiredisExecutor (pool, watchdog connection, subscriber)
// whose connections dial wherever the Sentinels say the master is now, and
// move when it moves: a +switch-master notice, or a call that finds the
// master gone or demoted, has the Sentinels asked again (see MasterTracker).
//
// A command refused with READONLY (the master was demoted, so nothing was
// written) is sent again once, to the new master if one is found at once;
// otherwise it throws ConnectionError. A command whose connection failed is
// never sent again here (it may have run): it throws ConnectionError as
// usual, and the caller's next try goes to the master found meanwhile.
//
// watch_resets: a connection of its own follows the master too, so a
// failover (another server, another run_id) or a restart of the master is
// told once the master answers; while it is unreachable the Sentinels are
// asked again.

#include <memory>

#include "dlock/config.hpp"
#include "dlock/hiredis_executor.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock {
namespace detail {
class MasterTracker;
class MasterWatch;
}

class SentinelExecutor final : public RedisExecutor {
 public:
  // Asks nobody yet; the first call (or connect) finds the master.
  explicit SentinelExecutor(RedisConfig config);
  ~SentinelExecutor() override;
  SentinelExecutor(const SentinelExecutor&) = delete;
  SentinelExecutor& operator=(const SentinelExecutor&) = delete;

  // Finds the master through the Sentinels and PINGs it. Throws
  // ConnectionError naming the Sentinels asked and the setting to check.
  void connect();

  RedisReply command(const RedisCommand& argv) override;
  RedisReply command_parts(std::span<const std::string_view> argv) override;
  std::vector<RedisReply> pipeline(const std::vector<RedisCommand>& commands) override;
  std::vector<RedisReply> urgent_pipeline(const std::vector<RedisCommand>& commands,
                                          std::chrono::steady_clock::time_point deadline) override;
  Subscription subscribe(const std::string& channel, MessageHandler on_message,
                         std::optional<std::chrono::milliseconds> confirm_within = std::nullopt) override;
  // The master's "host:port" as known now.
  std::string endpoint() const override;
  Subscription watch_resets(ResetHandler on_reset) override;

 private:
  // Runs `call` on the master; see the top of this file for what is retried.
  template <typename Call>
  auto on_master(Call&& call);

  const std::string master_name_;
  std::shared_ptr<detail::MasterTracker> tracker_;
  HiredisExecutor master_;
  std::unique_ptr<detail::MasterWatch> watch_;  // follows the master as master_ does
};

}  // namespace dlock
