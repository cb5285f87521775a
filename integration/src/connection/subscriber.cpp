// The subscriber: its thread's loop (SUBSCRIBE for the channels wanted, messages called
// back, PINGs on a silent connection, reconnecting with back-off), subscribe and cancel.
#include "dlock/subscriber.hpp"

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>
#include <set>

#include "connection/callback_calls.hpp"
#include "connection/wake_fd.hpp"
#include "dlock/errors.hpp"
#include "dlock/redis_connection.hpp"

// Threads and ownership: callers register callbacks in State under its mutex
// and wake the subscriber thread through an eventfd; only that thread touches
// the Redis connection. It compares the channels wanted (State::channels) with
// the channels it has sent SUBSCRIBE for, sends the difference, and reports
// acknowledged channels back in State::confirmed.

namespace dlock::detail {
namespace pubsub {

// Subscriber::State is private, so its body lives here where the thread's
// loop and the cancel function can name it.
struct SharedState {
  using Callback = std::shared_ptr<MessageHandler>;

  explicit SharedState(RedisConfig redis_config) : config(std::move(redis_config)) {}
  SharedState(const SharedState&) = delete;
  SharedState& operator=(const SharedState&) = delete;

  void wake() const { wakeup.wake(); }

  const RedisConfig config;
  const WakeFd wakeup{"dlock subscriber"};

  std::mutex mutex;
  std::condition_variable changed;  // a channel confirmed, a callback finished, or stopping
  std::map<std::string, std::map<std::uint64_t, Callback>> channels;  // guarded by mutex: wanted ones
  std::set<std::string> confirmed;  // guarded by mutex: acknowledged on the current connection
  std::uint64_t next_id = 1;        // guarded by mutex
  std::uint64_t running_id = 0;     // guarded by mutex: subscription whose callback runs now
  bool stopping = false;            // guarded by mutex
  std::thread thread;               // guarded by mutex (started lazily)
  std::thread::id thread_id;        // guarded by mutex
  std::atomic<std::uint64_t> connection_failures{0};  // kept for debugging; nothing is logged
};

}  // namespace pubsub

struct Subscriber::State : pubsub::SharedState {
  using SharedState::SharedState;
};

namespace {

using State = pubsub::SharedState;
using Clock = std::chrono::steady_clock;

constexpr auto kFirstBackoff = std::chrono::milliseconds(50);
// While anything is subscribed, a connection silent this long is asked for a
// PONG, which must come within the command timeout.
constexpr auto kPingInterval = std::chrono::milliseconds(1000);
constexpr auto kMaxBackoff = std::chrono::milliseconds(1000);

bool on_subscriber_thread(const State& state) { return std::this_thread::get_id() == state.thread_id; }

// The subscriber thread's side: the connection and what was sent on it.
class Loop {
 public:
  explicit Loop(State& state) : state_(state) {}

  void run() {
    bool ever_failed = false;
    while (!stopping()) {
      if (!connection_) {
        try {
          // Its socket has TCP keepalive on: the kernel's probes are a second line behind the PINGs.
          connection_ = std::make_unique<RedisConnection>(state_.config);
          last_heard_ = Clock::now();
        } catch (const Error&) {
          ++state_.connection_failures;
          ever_failed = true;
          back_off();
          continue;
        }
        if (ever_failed) owe_notice_to_all();
      }
      try {
        send_changes();
        dispatch_buffered();
        wait_for_input();
      } catch (const ConnectionError&) {
        ++state_.connection_failures;
        ever_failed = true;
        // A connection that never answered (e.g. the server accepts and then
        // hangs up at once) must not turn reconnecting into a busy loop.
        const bool answered = answered_;
        drop_connection();
        if (!answered) back_off();
      }
    }
    drop_connection();
  }

 private:
  void back_off() {
    sleep_interruptibly(backoff_);
    backoff_ = std::min(backoff_ * 2, kMaxBackoff);
  }

  bool stopping() {
    std::lock_guard lock(state_.mutex);
    return state_.stopping;
  }

  void sleep_interruptibly(std::chrono::milliseconds duration) {
    pollfd watched{state_.wakeup.fd(), POLLIN, 0};
    if (::poll(&watched, 1, static_cast<int>(duration.count())) > 0) state_.wakeup.drain();
  }

  // Every channel wanted now (or still owed from an earlier failed attempt)
  // gets one call once it is subscribed again: a message may have been missed.
  void owe_notice_to_all() {
    std::lock_guard lock(state_.mutex);
    for (const auto& entry : state_.channels) owed_notice_.insert(entry.first);
  }

  void drop_connection() {
    connection_.reset();
    answered_ = false;
    ping_sent_.reset();
    sent_.clear();
    unacknowledged_.clear();
    std::lock_guard lock(state_.mutex);
    state_.confirmed.clear();
  }

  void send_changes() {
    std::vector<std::string> to_subscribe;
    std::vector<std::string> to_unsubscribe;
    {
      std::lock_guard lock(state_.mutex);
      for (const auto& entry : state_.channels) {
        if (!sent_.contains(entry.first)) to_subscribe.push_back(entry.first);
      }
      for (const auto& channel : sent_) {
        if (!state_.channels.contains(channel)) {
          to_unsubscribe.push_back(channel);
          state_.confirmed.erase(channel);
          owed_notice_.erase(channel);
        }
      }
    }
    if (to_subscribe.empty() && to_unsubscribe.empty()) return;
    std::vector<RedisCommand> commands;
    for (const auto& channel : to_subscribe) {
      commands.push_back({"SUBSCRIBE", channel});
      sent_.insert(channel);
      ++unacknowledged_[channel];
    }
    for (const auto& channel : to_unsubscribe) {
      commands.push_back({"UNSUBSCRIBE", channel});
      sent_.erase(channel);
    }
    connection_->send_only(commands);
  }

  // Replies may already sit in the reader from an earlier read; poll()
  // would not report them, so they are handled before sleeping.
  void dispatch_buffered() {
    while (const auto reply = connection_->buffered_reply()) handle(*reply);
  }

  void wait_for_input() {
    // With TLS, bytes may already wait inside OpenSSL, where poll() cannot
    // see them: read those instead of sleeping on the socket. Only a partial
    // record there (nothing read) needs the socket, and poll() below.
    if (connection_->input_pending() && connection_->read_available()) {
      last_heard_ = Clock::now();
    } else {
      pollfd watched[2] = {{connection_->fd(), POLLIN, 0}, {state_.wakeup.fd(), POLLIN, 0}};
      const int ready = ::poll(watched, 2, poll_timeout_ms());
      if (ready < 0) {
        if (errno == EINTR) return;
        connection_->fail("waiting for messages");
      }
      if (ready > 0 && watched[1].revents != 0) state_.wakeup.drain();
      if (ready > 0 && watched[0].revents != 0 && connection_->read_available()) last_heard_ = Clock::now();
    }
    // A master that moved away (Sentinel) may keep this connection up as a
    // replica, where no release is ever published: follow it within a PING interval.
    if (connection_->broken()) connection_->fail("following the master to its new address");
    // On every pass, not only when poll() timed out: a stream of wake-ups
    // (subscriptions coming and going) must not postpone the PING.
    check_liveness();
  }

  // How long poll() may sleep: forever with nothing subscribed, else until
  // the next PING is due or the one sent must have been answered.
  int poll_timeout_ms() const {
    if (sent_.empty()) return -1;
    const Clock::time_point due = ping_sent_ ? *ping_sent_ + state_.config.command_timeout : last_heard_ + kPingInterval;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(due - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, kPingInterval.count()));
  }

  void check_liveness() {
    if (sent_.empty()) return;
    const Clock::time_point now = Clock::now();
    if (ping_sent_) {
      if (now >= *ping_sent_ + state_.config.command_timeout) {
        connection_->fail("waiting for a PONG (the connection went silent)");
      }
      return;
    }
    if (now < last_heard_ + kPingInterval) return;
    connection_->send_only({{"PING"}});
    ping_sent_ = now;
  }

  void handle(const RedisReply& reply) {
    // Error replies (e.g. an ACL user without channel rights, or a server that
    // refuses the client and closes) are left alone, and prove nothing: the
    // subscription stays unconfirmed, its waiters fall back to timed retries,
    // and reconnecting keeps backing off.
    if (reply.is_error()) return;
    answered_ = true;
    backoff_ = kFirstBackoff;
    // A PING's answer: ["pong", ""] while subscribed, +PONG before the first channel.
    if (is_pong(reply)) {
      ping_sent_.reset();
      return;
    }
    if (reply.type != RedisReply::Type::Array || reply.elements.size() < 3) return;
    const std::string& kind = reply.elements[0].str;
    const std::string& channel = reply.elements[1].str;
    if (kind == "message") {
      call_back(channel, reply.elements[2].str);
    } else if (kind == "subscribe") {
      acknowledge(channel);
    }
  }

  void acknowledge(const std::string& channel) {
    auto pending = unacknowledged_.find(channel);
    if (pending == unacknowledged_.end()) return;
    if (--pending->second > 0) return;  // an older SUBSCRIBE of a channel unsubscribed and wanted again
    unacknowledged_.erase(pending);
    bool owed = false;
    {
      std::lock_guard lock(state_.mutex);
      if (!sent_.contains(channel)) return;
      state_.confirmed.insert(channel);
      owed = owed_notice_.erase(channel) > 0;
    }
    state_.changed.notify_all();
    if (owed) call_back(channel, "");
  }

  // The channel's callbacks, as callback_calls.hpp says: without the mutex
  // (they may subscribe or reset), and none after its reset returned.
  void call_back(const std::string& channel, const std::string& message) {
    std::vector<std::pair<std::uint64_t, State::Callback>> targets;
    {
      std::lock_guard lock(state_.mutex);
      auto found = state_.channels.find(channel);
      if (found == state_.channels.end()) return;
      targets.assign(found->second.begin(), found->second.end());
    }
    const auto still_subscribed = [&](std::uint64_t id) {
      auto found = state_.channels.find(channel);
      return found != state_.channels.end() && found->second.contains(id);
    };
    call_each(state_.mutex, state_.changed, state_.running_id, targets, still_subscribed, message);
  }

  static bool is_pong(const RedisReply& reply) {
    if (reply.type == RedisReply::Type::Status) return reply.str == "PONG";
    return reply.type == RedisReply::Type::Array && reply.elements.size() == 2 && reply.elements[0].str == "pong";
  }

  // Everything below is touched by the subscriber thread only.
  State& state_;
  Clock::time_point last_heard_ = Clock::now();  // the connection last delivered bytes
  std::optional<Clock::time_point> ping_sent_;     // a PING awaits its answer
  std::unique_ptr<RedisConnection> connection_;
  bool answered_ = false;  // the current connection delivered a reply: reconnect at once if it drops
  std::chrono::milliseconds backoff_ = kFirstBackoff;  // reset by a reply, so only proven connections reset it
  std::set<std::string> sent_;                       // SUBSCRIBE sent on this connection, no UNSUBSCRIBE since
  std::map<std::string, int> unacknowledged_;        // SUBSCRIBEs sent but not yet acknowledged
  std::set<std::string> owed_notice_;                // channels to call once when next acknowledged
};

void cancel(const std::weak_ptr<State>& weak_state, const std::string& channel, std::uint64_t id) {
  const auto state = weak_state.lock();
  if (!state) return;  // the Subscriber is gone, and its subscriptions with it
  std::unique_lock lock(state->mutex);
  auto found = state->channels.find(channel);
  if (found == state->channels.end() || found->second.erase(id) == 0) return;
  if (found->second.empty()) {
    state->channels.erase(found);
    state->wake();
  }
  // Wait out a call in progress so the caller may free what the callback uses;
  // from inside a callback that would wait for itself.
  if (!on_subscriber_thread(*state)) {
    state->changed.wait(lock, [&] { return state->running_id != id || state->stopping; });
  }
}

}  // namespace

Subscriber::Subscriber(RedisConfig config) : state_(std::make_shared<State>(std::move(config))) {}

Subscriber::~Subscriber() {
  std::thread thread;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    thread = std::move(state_->thread);
  }
  state_->wake();
  state_->changed.notify_all();
  // The thread co-owns the state: detached, it keeps it alive until it exits.
  join_unless_calling(std::move(thread));
}

Subscription Subscriber::subscribe(const std::string& channel, MessageHandler on_message,
                                   std::optional<Millis> confirm_within) {
  std::unique_lock lock(state_->mutex);
  const std::uint64_t id = state_->next_id++;
  auto& callbacks = state_->channels[channel];
  const bool first_on_channel = callbacks.empty();
  callbacks.emplace(id, std::make_shared<MessageHandler>(std::move(on_message)));
  if (!state_->thread.joinable()) {
    // The thread co-owns the state so it stays valid even if detached (see ~Subscriber).
    state_->thread = std::thread([state = state_] { Loop(*state).run(); });
    state_->thread_id = state_->thread.get_id();
  }
  if (first_on_channel) state_->wake();

  Subscription subscription([weak = std::weak_ptr<State>(state_), channel, id] { cancel(weak, channel, id); });
  // The subscriber thread cannot acknowledge while it waits for itself.
  if (!on_subscriber_thread(*state_)) {
    state_->changed.wait_until(lock, Clock::now() + confirm_within.value_or(state_->config.command_timeout), [&] {
      return state_->confirmed.contains(channel) || state_->stopping;
    });
  }
  return subscription;
}

void refuse_subscribing_after_fork(const std::string& endpoint, const std::string& channel) {
  throw ConnectionError("redis " + endpoint + ": cannot subscribe to '" + channel +
                        "': this executor was made before fork(), and its subscriber thread stayed in the "
                        "parent; a lock service cannot be shared across fork(): create a new one in the child");
}

}  // namespace dlock::detail
