#include "master_tracker.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <vector>

#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"
#include "dlock/subscriber.hpp"
#include "master_discovery.hpp"

namespace dlock::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Callers that find the master failing (every retry of every thread during
// an outage) ask the Sentinels at most this often between them.
constexpr auto kMinLookInterval = std::chrono::milliseconds(200);

// The Sentinels in turn, for the +switch-master subscription: each reconnect
// of the subscriber dials the next one, so a Sentinel that failed is left.
class SentinelRotation final : public EndpointSource {
 public:
  explicit SentinelRotation(std::vector<NodeAddress> nodes) : nodes_(std::move(nodes)) {}
  NodeAddress next() override {
    if (nodes_.empty()) throw ConnectionError("redis.sentinel.nodes is empty; name at least one Sentinel");
    return nodes_[turn_.fetch_add(1) % nodes_.size()];
  }
  std::uint64_t epoch() const override { return 0; }

 private:
  const std::vector<NodeAddress> nodes_;
  std::atomic<std::size_t> turn_{0};
};

void log_info(const std::string& text) {
  if (auto logger = spdlog::get("dlock")) logger->info("{}", text);
}

}  // namespace

MasterTracker::MasterTracker(RedisConfig config) : config_(std::move(config)), generation_(fork_generation()) {
  // next() takes mutex_ briefly on every connect; a child must not inherit it locked.
  hold_across_fork(mutex_);
}

MasterTracker::~MasterTracker() {
  release_across_fork(mutex_);
  if (forked()) {
    // The threads stayed in the parent: joining them would never return.
    (void)follower_.release();
    (void)switch_notices_.release();
    (void)sentinels_.release();
    return;
  }
  switch_notices_.reset();  // waits out a notice being handled
  sentinels_.reset();
  {
    std::lock_guard lock(follow_mutex_);
    stopping_ = true;
  }
  follow_changed_.notify_all();
  if (follower_ && follower_->joinable()) follower_->join();
}

bool MasterTracker::forked() const { return generation_ != fork_generation(); }

NodeAddress MasterTracker::next() {
  if (auto known = known_master()) return *known;
  std::lock_guard looking(looking_);
  if (auto known = known_master()) return *known;  // found meanwhile by another thread
  const NodeAddress found = discover_master(config_);
  last_look_ = Clock::now();
  move_to(found);
  return found;
}

std::optional<NodeAddress> MasterTracker::known_master() const {
  std::lock_guard lock(mutex_);
  return master_;
}

bool MasterTracker::move_to(const NodeAddress& found) {
  std::optional<NodeAddress> before;
  {
    std::lock_guard lock(mutex_);
    if (master_ == found) return false;
    before = master_;
    // The address first, then the epoch: a connection reads the epoch before
    // the address, so one made meanwhile is at worst dropped once too often.
    master_ = found;
    if (before) epoch_.fetch_add(1);
  }
  if (before) {
    log_info("sentinel: master '" + config_.sentinel.master_name + "' is now at " + to_string(found) + " (was " +
             to_string(*before) + "); connections move there");
  }
  return before.has_value();
}

bool MasterTracker::look_again(std::uint64_t seen_epoch) {
  if (forked()) return false;  // a fork child keeps the master known at the fork
  std::lock_guard looking(looking_);
  if (epoch_.load() != seen_epoch) return true;
  if (Clock::now() < last_look_ + kMinLookInterval) return false;
  try {
    const NodeAddress found = discover_master(config_);
    last_look_ = Clock::now();
    move_to(found);
  } catch (const ConnectionError& e) {
    last_look_ = Clock::now();
    if (auto logger = spdlog::get("dlock")) logger->debug("sentinel: looking for the master: {}", e.what());
  }
  return epoch_.load() != seen_epoch;
}

void MasterTracker::suspect() {
  {
    std::lock_guard lock(follow_mutex_);
    suspected_ = true;
  }
  follow_changed_.notify_one();
}

void MasterTracker::start_following() {
  follower_ = std::make_unique<std::thread>([this] { follow(); });
  RedisConfig dial = sentinel_connection_config(config_, true);
  dial.endpoint_source = std::make_shared<SentinelRotation>(config_.sentinel.nodes);
  sentinels_ = std::make_unique<Subscriber>(std::move(dial));
  // Not waited for: start-up is not held up by a slow Sentinel. The callback
  // also runs, empty, after each reconnect, when a switch may have been missed.
  switch_notices_ = std::make_unique<Subscription>(sentinels_->subscribe(
      "+switch-master",
      [this](const std::string&) {
        {
          std::lock_guard lock(follow_mutex_);
          notified_ = true;
        }
        follow_changed_.notify_one();
      },
      Millis(0)));
}

void MasterTracker::follow() {
  std::unique_lock lock(follow_mutex_);
  for (;;) {
    follow_changed_.wait(lock, [&] { return stopping_ || notified_ || suspected_; });
    if (stopping_) return;
    if (!notified_) {
      // Only suspected: callers keep failing while a master is down, so looks are spaced.
      follow_changed_.wait_for(lock, kMinLookInterval, [&] { return stopping_ || notified_; });
      if (stopping_) return;
    }
    notified_ = suspected_ = false;
    lock.unlock();
    {
      std::lock_guard looking(looking_);
      last_look_ = {};  // this look is never skipped as too soon
    }
    look_again(epoch_.load());
    lock.lock();
  }
}

}  // namespace dlock::detail
