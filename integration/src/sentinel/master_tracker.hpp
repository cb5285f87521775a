#pragma once
// Where the master of a Sentinel-monitored set is now, as an EndpointSource:
// every connection of a SentinelExecutor dials next(), and counts as broken
// once epoch() moves on, which it does each time the master is found at
// another address. The pool, the watchdog's connection and the subscriber
// therefore all follow a failover by reconnecting, without a restart.
//
// The master is looked for again when a Sentinel announces +switch-master for
// our master name (a thread listens on one Sentinel, moving to the next when
// that one fails, and looks again after each reconnect, since a notice may
// have been missed) and when a caller found the master gone or demoted
// (suspect, look_again). Each look asks every Sentinel (discover_master).
//
// The tracker remembers the config-epoch under which its master was named
// and never moves to an address named under a lower one: a Sentinel behind
// the others (restarted from its config file) names a demoted master that
// may still answer ROLE as a master, and following it would send every
// connection there and tell holders of locks on the real master they lost them.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "dlock/config.hpp"
#include "dlock/redis_executor.hpp"
#include "sentinel/master_discovery.hpp"

namespace dlock::detail {

class Subscriber;

class MasterTracker final : public EndpointSource {
 public:
  // Finds nothing yet: the first next() does (or start_following's thread).
  explicit MasterTracker(RedisConfig config);
  ~MasterTracker() override;
  MasterTracker(const MasterTracker&) = delete;
  MasterTracker& operator=(const MasterTracker&) = delete;

  // The current master; the first call asks the Sentinels and throws
  // ConnectionError as discover_master does when none names one.
  NodeAddress next() override;
  std::uint64_t epoch() const override { return epoch_.load(); }

  // The master known now, if any, without asking anyone.
  std::optional<NodeAddress> known_master() const;

  // Starts listening for +switch-master on the Sentinels.
  void start_following();

  // Asks the Sentinels now, on the caller's thread, unless the master moved
  // since `seen_epoch` already (or was looked for moments ago). Returns
  // whether it moved since `seen_epoch`. Never throws.
  bool look_again(std::uint64_t seen_epoch);

  // Has the following thread look again soon; returns at once.
  void suspect();

 private:
  // Records `found` as the master unless it is named under a lower
  // config-epoch than the one known; returns whether the master moved.
  bool move_to(const FoundMaster& found);
  void follow();  // the following thread's loop
  bool forked() const;

  const RedisConfig config_;
  const unsigned generation_;  // fork_generation() when made

  mutable std::mutex mutex_;
  std::optional<NodeAddress> master_;  // guarded by mutex_
  std::uint64_t config_epoch_ = 0;     // guarded by mutex_: the one master_ was named under
  std::atomic<std::uint64_t> epoch_{0};  // written under mutex_, after master_

  std::mutex looking_;  // one look at a time; held while asking the Sentinels
  std::chrono::steady_clock::time_point last_look_{};  // guarded by looking_

  std::mutex follow_mutex_;
  std::condition_variable follow_changed_;
  bool notified_ = false;   // guarded by follow_mutex_: a Sentinel announced a switch (or we reconnected)
  bool suspected_ = false;  // guarded by follow_mutex_: a caller found the master failing
  bool stopping_ = false;   // guarded by follow_mutex_
  std::unique_ptr<std::thread> follower_;
  std::unique_ptr<Subscriber> sentinels_;  // the +switch-master subscription's connection
  std::unique_ptr<Subscription> switch_notices_;  // a pointer, so a fork child can leave it alone
};

}  // namespace dlock::detail
