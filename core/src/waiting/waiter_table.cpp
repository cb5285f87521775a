// Local waiters in line per release channel: the channel's subscription, the notice that
// wakes the waiter it names, and a releaser's offer of its lock to a waiter asleep in line.
#include "dlock/detail/waiter_table.hpp"

#include <algorithm>
#include <utility>

namespace dlock::detail {

struct WaiterTable::Waiter {
  Waiter(std::string owner_, long long lease_ms_) : owner(std::move(owner_)), lease_ms(lease_ms_) {}
  const std::string owner;
  const long long lease_ms;
  std::condition_variable cv;
  bool notified = false;                 // guarded by State::mutex
  bool asleep = false;                   // guarded by State::mutex: in wait(), running no script
  bool offered = false;                  // guarded by State::mutex: a release may be granting it the lock
  std::optional<DirectGrant> granted;    // guarded by State::mutex
};

struct WaiterTable::Channel {
  explicit Channel(std::string name_) : name(std::move(name_)) {}
  const std::string name;
  std::list<Waiter> line;            // guarded by State::mutex; oldest first
  bool subscribing = true;           // guarded by State::mutex
  std::condition_variable subscribed;
  Subscription subscription;         // guarded by State::mutex
};

struct WaiterTable::State {
  std::mutex mutex;
  // Looked up by string_view too: a release looks up its channel on every call.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  std::unordered_map<std::string, std::unique_ptr<Channel>, NameHash, std::equal_to<>> channels;  // guarded by mutex

  // Called from the subscriber's thread on every release notice.
  void notify(std::string_view name, const std::string& owner) {
    std::lock_guard guard(mutex);
    auto it = channels.find(name);
    if (it == channels.end()) return;
    if (owner.empty()) {
      for (Waiter& waiter : it->second->line) {
        waiter.notified = true;
        waiter.cv.notify_one();
      }
      return;
    }
    for (Waiter& waiter : it->second->line) {
      if (waiter.owner == owner) {
        waiter.notified = true;
        waiter.cv.notify_one();
        return;
      }
    }
  }

  static void wake_next(Channel& channel) {
    for (Waiter& waiter : channel.line) {
      if (!waiter.notified) {
        waiter.notified = true;
        waiter.cv.notify_one();
        return;
      }
    }
  }
};

WaiterTable::WaiterTable(RedisExecutor& redis) : state_(std::make_shared<State>()), redis_(redis) {}

WaiterTable::~WaiterTable() = default;

void WaiterTable::enter(std::string_view channel_name, const std::string& owner, long long lease_ms,
                        Ticket& ticket, std::chrono::steady_clock::time_point until) {
  const std::string name(channel_name);
  std::unique_lock guard(state_->mutex);
  auto [it, created] = state_->channels.try_emplace(name);
  if (created) it->second = std::make_unique<Channel>(name);
  Channel* channel = it->second.get();
  channel->line.emplace_back(owner, lease_ms);
  ticket.state_ = state_;
  ticket.channel_ = channel;
  ticket.self_ = std::prev(channel->line.end());

  if (created) {
    // Subscribe without the mutex: the subscriber's thread takes it to deliver notices.
    guard.unlock();
    std::weak_ptr<State> weak = state_;
    Subscription subscription;
    try {
      const auto left = std::max(Millis(0), std::chrono::ceil<Millis>(until - std::chrono::steady_clock::now()));
      subscription = redis_.subscribe(
          name,
          [weak, name](const std::string& owner) {
            if (auto state = weak.lock()) state->notify(name, owner);
          },
          left);
    } catch (...) {
      // No subscription: the waiters fall back to their timed retries.
    }
    guard.lock();
    channel->subscription = std::move(subscription);
    channel->subscribing = false;
    channel->subscribed.notify_all();
  } else {
    channel->subscribed.wait_until(guard, until, [channel] { return !channel->subscribing; });
  }
}

void WaiterTable::notify(std::string_view channel, const std::string& owner) { state_->notify(channel, owner); }

WaiterTable::Offer WaiterTable::offer(std::string_view name, const std::string& releaser) {
  Offer offer;
  std::lock_guard guard(state_->mutex);
  auto it = state_->channels.find(name);
  if (it == state_->channels.end()) return offer;
  for (Waiter& waiter : it->second->line) {
    if (waiter.asleep && !waiter.offered && !waiter.notified && !waiter.granted && waiter.owner != releaser) {
      waiter.offered = true;
      offer.state_ = state_;
      offer.waiter_ = &waiter;
      return offer;
    }
  }
  return offer;
}

WaiterTable::Offer::Offer(Offer&& other) noexcept
    : state_(std::move(other.state_)), waiter_(std::exchange(other.waiter_, nullptr)) {}

// An offered waiter cannot leave its line until the offer is settled, so waiter_ stays valid until then.
const std::string& WaiterTable::Offer::owner() const { return waiter_->owner; }

long long WaiterTable::Offer::lease_ms() const { return waiter_->lease_ms; }

void WaiterTable::Offer::grant(const DirectGrant& grant) {
  {
    std::lock_guard guard(state_->mutex);
    waiter_->granted = grant;
    waiter_->offered = false;
    waiter_->cv.notify_one();
  }
  state_.reset();
}

void WaiterTable::Offer::decline() {
  if (!state_) return;
  {
    std::lock_guard guard(state_->mutex);
    // Not granted (or not known to be): the waiter tries again by itself.
    waiter_->offered = false;
    waiter_->notified = true;
    waiter_->cv.notify_one();
  }
  state_.reset();
}

WaiterTable::Offer::~Offer() { decline(); }

WaiterTable::Ticket::Ticket(std::shared_ptr<State> state, Channel* channel, std::list<Waiter>::iterator self)
    : state_(std::move(state)), channel_(channel), self_(self) {}

std::optional<WaiterTable::DirectGrant> WaiterTable::Ticket::wait(Millis at_most) {
  const auto until = std::chrono::steady_clock::now() + at_most;
  std::unique_lock guard(state_->mutex);
  Waiter& self = *self_;
  self.asleep = true;
  for (;;) {
    if (self.offered) {
      self.cv.wait(guard);  // the releaser settles it within its command's timeout
      continue;
    }
    if (self.granted || self.notified) break;
    if (self.cv.wait_until(guard, until) == std::cv_status::timeout && !self.offered) break;
  }
  self.asleep = false;
  self.notified = false;
  return std::exchange(self.granted, std::nullopt);
}

WaiterTable::Ticket::~Ticket() {
  if (!state_) return;
  Subscription unsubscribe;
  {
    std::lock_guard guard(state_->mutex);
    bool unused_notice = self_->notified;
    channel_->line.erase(self_);
    if (unused_notice) State::wake_next(*channel_);
    if (channel_->line.empty()) {
      unsubscribe = std::move(channel_->subscription);
      std::string name = channel_->name;  // a copy: erasing destroys *channel_
      state_->channels.erase(name);
    }
  }
  // unsubscribe is reset here, outside the mutex.
}

}  // namespace dlock::detail
