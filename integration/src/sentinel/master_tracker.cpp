// Following a Sentinel set's master: the +switch-master listener, the thread that looks again
// when told or suspecting, and no move to an address named under an older config-epoch.
#include "sentinel/master_tracker.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <vector>

#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"
#include "dlock/subscriber.hpp"
#include "sentinel/master_discovery.hpp"

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

// "+switch-master" reads "<name> <old-ip> <old-port> <new-ip> <new-port>"; a
// Sentinel watching several masters announces each one's switches.
bool is_switch_of(const std::string& notice, const std::string& master_name) {
  return notice.starts_with(master_name + " ");
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
  const FoundMaster found = discover_master(config_);
  last_look_ = Clock::now();
  move_to(found);
  return found.address;
}

std::optional<NodeAddress> MasterTracker::known_master() const {
  std::lock_guard lock(mutex_);
  return master_;
}

bool MasterTracker::move_to(const FoundMaster& found) {
  std::optional<NodeAddress> before;
  std::uint64_t known_epoch = 0;
  {
    std::lock_guard lock(mutex_);
    before = master_;
    known_epoch = config_epoch_;
  }
  if (before && found.config_epoch < known_epoch && found.address != *before) {
    // Only Sentinels behind the one that named our master answered: they name
    // a master it has replaced, which may still take writes until it is
    // demoted. Unless ours is no master any more: then the epochs went back
    // (Sentinels set up anew count from 0) and the older name is the only one.
    const std::string why_not = why_not_master(config_, *before);
    if (why_not.empty()) {
      if (auto logger = spdlog::get("dlock")) {
        logger->debug("sentinel: staying on {} (config-epoch {}): the Sentinels that answered name {} under the older "
                      "config-epoch {}; check that the others in redis.sentinel.nodes are reachable",
                      to_string(*before), known_epoch, to_string(found.address), found.config_epoch);
      }
      return false;
    }
    log_info("sentinel: the Sentinels name " + to_string(found.address) + " under config-epoch " +
             std::to_string(found.config_epoch) + ", older than the " + std::to_string(known_epoch) + " of " +
             to_string(*before) + ", which is no master now (" + why_not + "): following them");
  }
  {
    std::lock_guard lock(mutex_);
    config_epoch_ = found.config_epoch;
    if (master_ == found.address) return false;
    // The address first, then the epoch: a connection reads the epoch before
    // the address, so one made meanwhile is at worst dropped once too often.
    master_ = found.address;
    if (before) epoch_.fetch_add(1);
  }
  if (before) {
    log_info("sentinel: master '" + config_.sentinel.master_name + "' is now at " + to_string(found.address) +
             " (config-epoch " + std::to_string(found.config_epoch) + "; was " + to_string(*before) +
             "); connections move there");
  }
  return before.has_value();
}

bool MasterTracker::look_again(std::uint64_t seen_epoch) {
  if (forked()) return false;  // a fork child keeps the master known at the fork
  std::lock_guard looking(looking_);
  if (epoch_.load() != seen_epoch) return true;
  if (Clock::now() < last_look_ + kMinLookInterval) return false;
  try {
    const FoundMaster found = discover_master(config_);
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
  // The notice's new address is not taken as it is: it carries no
  // config-epoch to rank it by. The look that follows asks every Sentinel,
  // the announcing one among them, and gets the address with its epoch.
  switch_notices_ = std::make_unique<Subscription>(sentinels_->subscribe(
      "+switch-master",
      [this](const std::string& notice) {
        if (!notice.empty() && !is_switch_of(notice, config_.sentinel.master_name)) return;
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
