// Local waiters in line per release channel: the channel's subscription, the notice that
// wakes the waiter it names, and a releaser's offer of its lock to a waiter asleep in line.
#include "dlock/detail/waiter_table.hpp"

#include <algorithm>
#include <unordered_set>
#include <utility>
#include <vector>

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
  std::function<void()> wake;            // guarded by State::mutex: an async sleeper's, until called
  bool expired = false;                  // guarded by State::mutex: an async sleep was ended by expire()

  // Wakes it: the blocking sleeper by its condition variable, the async one
  // by its callback, handed to `call` to run once the mutex is released.
  void rouse(std::vector<std::function<void()>>& call) {
    cv.notify_one();
    if (wake && !offered) {
      asleep = false;  // about to run a try of its own: never offered the lock meanwhile
      call.push_back(std::exchange(wake, nullptr));
    }
  }
};

namespace {

void run_all(std::vector<std::function<void()>>& calls) {
  for (auto& call : calls) call();
}

thread_local bool waking_with_grant_now = false;

}  // namespace

struct WaiterTable::Channel {
  explicit Channel(std::string name_) : name(std::move(name_)) {}
  const std::string name;
  std::list<Waiter> line;            // guarded by State::mutex; oldest first
  bool subscribing = true;           // guarded by State::mutex
  std::condition_variable subscribed;
  Subscription subscription;         // guarded by State::mutex
  std::string kept_key;              // guarded by State::mutex: the user key, if the line keeper renews this line
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
    std::vector<std::function<void()>> call;
    {
      std::lock_guard guard(mutex);
      auto it = channels.find(name);
      if (it == channels.end()) return;
      for (Waiter& waiter : it->second->line) {
        if (!owner.empty() && waiter.owner != owner) continue;
        waiter.notified = true;
        waiter.rouse(call);
        if (!owner.empty()) break;
      }
    }
    run_all(call);
  }

  static void wake_next(Channel& channel, std::vector<std::function<void()>>& call) {
    for (Waiter& waiter : channel.line) {
      if (!waiter.notified) {
        waiter.notified = true;
        waiter.rouse(call);
        return;
      }
    }
  }
};

WaiterTable::WaiterTable(RedisExecutor& redis) : state_(std::make_shared<State>()), redis_(redis) {}

WaiterTable::~WaiterTable() = default;

void WaiterTable::enter(std::string_view channel_name, const std::string& owner, long long lease_ms,
                        Ticket& ticket, std::chrono::steady_clock::time_point until, std::string_view kept_key) {
  const std::string name(channel_name);
  std::unique_lock guard(state_->mutex);
  auto [it, created] = state_->channels.try_emplace(name);
  if (created) it->second = std::make_unique<Channel>(name);
  Channel* channel = it->second.get();
  if (!kept_key.empty()) channel->kept_key = kept_key;
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

void WaiterTable::notify_each(std::string_view name, const std::vector<std::string>& owners) {
  const std::unordered_set<std::string_view> wanted(owners.begin(), owners.end());
  std::vector<std::function<void()>> call;
  {
    std::lock_guard guard(state_->mutex);
    auto it = state_->channels.find(name);
    if (it == state_->channels.end()) return;
    for (Waiter& waiter : it->second->line) {
      if (!wanted.contains(waiter.owner)) continue;
      waiter.notified = true;
      waiter.rouse(call);
    }
  }
  run_all(call);
}

std::vector<WaiterTable::KeptLine> WaiterTable::kept_lines() const {
  std::vector<KeptLine> lines;
  std::lock_guard guard(state_->mutex);
  for (const auto& [name, channel] : state_->channels) {
    if (channel->kept_key.empty() || channel->line.empty()) continue;
    KeptLine& line = lines.emplace_back();
    line.key = channel->kept_key;
    line.channel = name;
    line.owners.reserve(channel->line.size());
    for (const Waiter& waiter : channel->line) line.owners.push_back(waiter.owner);
  }
  return lines;
}

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
  std::vector<std::function<void()>> call;
  {
    std::lock_guard guard(state_->mutex);
    waiter_->granted = grant;
    waiter_->offered = false;
    waiter_->rouse(call);
  }
  state_.reset();
  const bool outer = std::exchange(waking_with_grant_now, true);  // a wake may release, and hand off, in turn
  run_all(call);
  waking_with_grant_now = outer;
}

bool WaiterTable::Ticket::take_grant_wake() { return std::exchange(waking_with_grant_now, false); }

void WaiterTable::Offer::decline() {
  if (!state_) return;
  std::vector<std::function<void()>> call;
  {
    std::lock_guard guard(state_->mutex);
    // Not granted (or not known to be): the waiter tries again by itself.
    waiter_->offered = false;
    waiter_->notified = true;
    waiter_->rouse(call);
  }
  state_.reset();
  run_all(call);
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

void WaiterTable::Ticket::sleep_async(std::function<void()> wake) {
  std::vector<std::function<void()>> call;
  {
    std::lock_guard guard(state_->mutex);
    Waiter& self = *self_;
    self.asleep = true;
    self.expired = false;
    self.wake = std::move(wake);
    // A notice or a grant that came while it was awake wakes it at once.
    if (self.granted || self.notified) self.rouse(call);
  }
  run_all(call);
}

bool WaiterTable::Ticket::expire() {
  std::vector<std::function<void()>> call;
  bool out_of_reach = false;
  {
    std::lock_guard guard(state_->mutex);
    Waiter& self = *self_;
    if (self.wake) {         // else not asleep, or already woken
      self.expired = true;
      self.rouse(call);      // unless an offer is in flight: its grant or decline wakes it
    }
    out_of_reach = !self.offered && !self.granted;
  }
  run_all(call);
  return out_of_reach;
}

std::optional<WaiterTable::DirectGrant> WaiterTable::Ticket::woken() {
  std::lock_guard guard(state_->mutex);
  Waiter& self = *self_;
  self.asleep = false;
  self.notified = false;
  self.expired = false;
  self.wake = nullptr;
  return std::exchange(self.granted, std::nullopt);
}

WaiterTable::Ticket::~Ticket() {
  if (!state_) return;
  Subscription unsubscribe;
  std::vector<std::function<void()>> call;
  {
    std::lock_guard guard(state_->mutex);
    bool unused_notice = self_->notified;
    channel_->line.erase(self_);
    if (unused_notice) State::wake_next(*channel_, call);
    if (channel_->line.empty()) {
      unsubscribe = std::move(channel_->subscription);
      std::string name = channel_->name;  // a copy: erasing destroys *channel_
      state_->channels.erase(name);
    }
  }
  run_all(call);
  // unsubscribe is reset here, outside the mutex.
}

}  // namespace dlock::detail
