// MasterWatch: its thread's loop (a connection per master, dialled again while it is down,
// greeted with PING and INFO server, PINGed when silent) and the listeners it tells of a reset.
#include "connection/master_watch.hpp"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "connection/callback_calls.hpp"
#include "connection/wake_fd.hpp"
#include "dlock/detail/fork_guard.hpp"
#include "dlock/detail/transient_state.hpp"
#include "dlock/errors.hpp"
#include "dlock/redis_connection.hpp"

namespace dlock::detail {
namespace {

using Clock = std::chrono::steady_clock;

// How soon a restarted master is seen once it accepts connections again.
constexpr Millis kRedialPeriod{50};
// The longest pause between dials of a server that accepts connections and then refuses them.
constexpr Millis kRefusedRedialMost{1000};
// How often the executor is asked to look for its masters while one is unreachable.
constexpr Millis kLookAgainPeriod{250};
// A connection silent this long is sent a PING.
constexpr Millis kPingInterval{1000};

// INFO server's run_id, or empty when the reply has none (an error: INFO refused).
std::string run_id_of(const RedisReply& info) {
  constexpr std::string_view field = "run_id:";
  if (info.type != RedisReply::Type::String) return {};
  const std::size_t at = info.str.find(field);
  if (at == std::string::npos) return {};
  const std::size_t from = at + field.size();
  return info.str.substr(from, info.str.find_first_of("\r\n", from) - from);
}

}  // namespace

namespace watch {

// MasterWatch::State is private, so its body lives here where the thread's
// loop and the cancel function can name it.
struct SharedState {
  explicit SharedState(MasterWatch::Masters masters_) : masters(std::move(masters_)) {
    // A parent thread may hold it at fork(); the child must not inherit it locked.
    hold_across_fork(mutex);
  }
  ~SharedState() { release_across_fork(mutex); }
  SharedState(const SharedState&) = delete;
  SharedState& operator=(const SharedState&) = delete;

  bool forked() const { return generation != fork_generation(); }
  bool on_thread() const { return std::this_thread::get_id() == thread_id; }

  const MasterWatch::Masters masters;
  const unsigned generation = fork_generation();  // of the process that made it
  const WakeFd wakeup{"dlock master watch"};

  std::mutex mutex;
  std::condition_variable changed;  // a listener's call finished, or stopping
  std::map<std::uint64_t, std::shared_ptr<RedisExecutor::ResetHandler>> listeners;  // guarded by mutex
  std::uint64_t next_id = 1;     // guarded by mutex
  std::uint64_t running_id = 0;  // guarded by mutex: the listener being called now
  bool stopping = false;         // guarded by mutex
  std::thread thread;            // guarded by mutex: started by the first watch()
  std::thread::id thread_id;     // guarded by mutex
};

}  // namespace watch

struct MasterWatch::State : watch::SharedState {
  using SharedState::SharedState;
};

namespace {

using State = watch::SharedState;

// The watch's thread: everything here is touched by it alone.
class Loop {
 public:
  explicit Loop(State& state) : state_(state) {}

  void run() {
    while (!stopping()) {
      follow_the_list();
      const Clock::time_point now = Clock::now();
      bool any_down = false;
      for (auto& [name, link] : links_) {
        step(link, now);
        any_down = any_down || link.phase != Link::Phase::up;
      }
      if (any_down && state_.masters.look_again && now >= next_look_) {
        next_look_ = now + kLookAgainPeriod;
        state_.masters.look_again();
        continue;  // the list may have changed
      }
      wait(any_down);
    }
  }

 private:
  struct Link {
    enum class Phase { down, greeting, identifying, up };
    RedisConfig config;
    std::unique_ptr<RedisConnection> connection;
    Phase phase = Phase::down;
    bool awaiting = false;            // a reply is due by `due`; else `due` is when to act next
    Clock::time_point due{};          // down: the next dial; greeting: the next PING; up: the next PING
    bool may_have_missed = false;     // broke, or a dial failed, since this master last answered
    std::optional<std::string> run_id;  // as last read; "" when it could not be read
    // After a connection that was accepted but failed before it answered (a
    // server at maxclients, one refusing the user): the pause before the next
    // dial, doubled each time up to kRefusedRedialMost; 0 once it answered.
    Millis refused_pause{0};
  };

  bool stopping() {
    std::lock_guard lock(state_.mutex);
    return state_.stopping;
  }

  // Links for the masters listed now; a master that was not one when the watch began is a reset.
  void follow_the_list() {
    std::vector<WatchedMaster> masters = state_.masters.list();
    std::map<std::string, Link> next;
    for (WatchedMaster& master : masters) {
      auto known = links_.find(master.name);
      if (known != links_.end()) {
        known->second.config = std::move(master.config);
        next.insert(links_.extract(known));
        continue;
      }
      Link& link = next[master.name];
      link.config = std::move(master.config);
      if (listed_once_) tell("redis " + master.name + " is a master now (a failover or a new node)");
    }
    links_ = std::move(next);  // a master no longer listed: its connection closes
    listed_once_ = listed_once_ || !masters.empty();
  }

  // Dials, sends what is due, and gives up on replies overdue.
  void step(Link& link, Clock::time_point now) {
    try {
      if (link.connection && link.connection->broken()) {
        link.connection->fail("following the master to its new address");
      }
      if (now < link.due) return;
      switch (link.phase) {
        case Link::Phase::down:
          dial(link, now);
          break;
        case Link::Phase::greeting:
          if (link.awaiting) link.connection->fail("waiting for the answer to PING");
          ask(link, {"PING"}, now);
          break;
        case Link::Phase::identifying:
          link.connection->fail("waiting for the answer to INFO server");
          break;
        case Link::Phase::up:
          if (link.awaiting) link.connection->fail("waiting for a PONG (the connection went silent)");
          ask(link, {"PING"}, now);
          break;
      }
    } catch (const Error&) {
      drop(link, now);
    }
  }

  void dial(Link& link, Clock::time_point now) {
    try {
      link.connection = std::make_unique<RedisConnection>(link.config);
    } catch (const Error&) {
      link.connection.reset();
      link.may_have_missed = true;
      link.due = now + kRedialPeriod;
      return;
    }
    link.phase = Link::Phase::greeting;
    ask(link, {"PING"}, now);
  }

  // Sends `command`, whose reply is due within the command timeout.
  void ask(Link& link, RedisCommand command, Clock::time_point now) {
    link.connection->send_only({std::move(command)});
    link.awaiting = true;
    link.due = now + link.config.command_timeout;
  }

  // A connection that failed. One that was up is dialled again at once (a
  // restart is noticed as soon as the server listens again), then every
  // kRedialPeriod while the server refuses connections. One that failed
  // before it answered was accepted and then refused or closed (maxclients,
  // a wrong password): dialled again after a pause that doubles, so a server
  // that refuses every client is not dialled in a loop.
  void drop(Link& link, Clock::time_point now) {
    const bool was_up = link.phase == Link::Phase::up;
    link.connection.reset();
    link.phase = Link::Phase::down;
    link.awaiting = false;
    link.may_have_missed = true;
    if (was_up) {
      link.refused_pause = Millis(0);
      link.due = now;
    } else {
      link.refused_pause = std::clamp(link.refused_pause * 2, kRedialPeriod, kRefusedRedialMost);
      link.due = now + link.refused_pause;
    }
  }

  void handle(const std::string& name, Link& link, const RedisReply& reply, Clock::time_point now) {
    switch (link.phase) {
      case Link::Phase::greeting:
        if (!transient_state(reply).empty()) {  // LOADING: no renewal would get a verdict yet
          link.awaiting = false;
          link.due = now + kRedialPeriod;
          return;
        }
        link.phase = Link::Phase::identifying;
        ask(link, {"INFO", "server"}, now);
        return;
      case Link::Phase::identifying: {
        const std::string id = run_id_of(reply);
        if (link.may_have_missed && (id.empty() || !link.run_id || *link.run_id != id)) {
          tell("redis " + name +
               (id.empty()
                    ? " answers again after its connection broke (INFO refused: whether it restarted is unknown)"
                    : " answers again with a new run_id " + id + " (it restarted, or another server took its place)"));
        }
        link.run_id = id;
        link.may_have_missed = false;
        link.refused_pause = Millis(0);
        link.phase = Link::Phase::up;
        link.awaiting = false;
        link.due = now + kPingInterval;
        return;
      }
      case Link::Phase::up:
        link.awaiting = false;
        link.due = now + kPingInterval;
        return;
      case Link::Phase::down:
        return;
    }
  }

  // Sleeps until a reply comes, something falls due, or the owner wakes the thread; then reads.
  void wait(bool any_down) {
    Clock::time_point until = Clock::now() + kPingInterval;
    if (any_down && state_.masters.look_again) until = std::min(until, next_look_);
    std::vector<pollfd> watched{{state_.wakeup.fd(), POLLIN, 0}};
    std::vector<std::pair<const std::string*, Link*>> polled;
    bool pending = false;
    for (auto& [name, link] : links_) {
      until = std::min(until, link.due);
      if (!link.connection) continue;
      pending = pending || link.connection->input_pending();  // TLS bytes poll() cannot see
      watched.push_back({link.connection->fd(), POLLIN, 0});
      polled.emplace_back(&name, &link);
    }
    const auto left = std::chrono::ceil<Millis>(until - Clock::now()).count();
    const int timeout = pending ? 0 : static_cast<int>(std::clamp<long long>(left, 0, kPingInterval.count()));
    const int ready = ::poll(watched.data(), watched.size(), timeout);
    if (ready < 0) return;  // EINTR: go round again
    if (watched[0].revents != 0) state_.wakeup.drain();
    const Clock::time_point now = Clock::now();
    for (std::size_t i = 0; i < polled.size(); ++i) {
      auto& [name, link] = polled[i];
      if (watched[i + 1].revents == 0 && !link->connection->input_pending()) continue;
      try {
        // Bytes on a connection with nothing asked are a close (or a server out of step): read_available throws.
        link->connection->read_available();
        while (const auto reply = link->connection->buffered_reply()) handle(*name, *link, *reply, now);
        if (link->phase == Link::Phase::up && !link->awaiting) link->due = now + kPingInterval;
      } catch (const Error&) {
        drop(*link, now);
      }
    }
  }

  // Every listener, as callback_calls.hpp says: without the mutex (they may
  // unsubscribe), and none after its unsubscribing returned.
  void tell(const std::string& what) {
    std::vector<std::pair<std::uint64_t, std::shared_ptr<RedisExecutor::ResetHandler>>> targets;
    {
      std::lock_guard lock(state_.mutex);
      targets.assign(state_.listeners.begin(), state_.listeners.end());
    }
    const auto still_listening = [&](std::uint64_t id) { return state_.listeners.contains(id); };
    call_each(state_.mutex, state_.changed, state_.running_id, targets, still_listening, what);
  }

  State& state_;
  std::map<std::string, Link> links_;  // by WatchedMaster::name
  bool listed_once_ = false;           // the masters listed at the start are no reset
  Clock::time_point next_look_{};
};

void cancel(const std::weak_ptr<State>& weak_state, std::uint64_t id) {
  const auto state = weak_state.lock();
  if (!state) return;  // the watch is gone, and its listeners with it
  std::unique_lock lock(state->mutex);
  if (state->listeners.erase(id) == 0) return;
  // Wait out a call in progress, so the caller may free what the listener
  // uses; not from inside it, nor in a fork child (the thread is not there).
  if (state->on_thread() || state->forked()) return;
  state->changed.wait(lock, [&] { return state->running_id != id || state->stopping; });
}

}  // namespace

MasterWatch::MasterWatch(Masters masters) : state_(std::make_shared<State>(std::move(masters))) {}

MasterWatch::~MasterWatch() {
  std::thread thread;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    // In a fork child the thread does not run: joining it would never return.
    // The thread's own reference keeps the state (and this std::thread) alive.
    if (state_->forked()) return;
    thread = std::move(state_->thread);
  }
  state_->wakeup.wake();
  state_->changed.notify_all();
  join_unless_calling(std::move(thread));
}

Subscription MasterWatch::watch(RedisExecutor::ResetHandler on_reset) {
  std::lock_guard lock(state_->mutex);
  const std::uint64_t id = state_->next_id++;
  state_->listeners.emplace(id, std::make_shared<RedisExecutor::ResetHandler>(std::move(on_reset)));
  if (!state_->thread.joinable() && !state_->forked()) {
    // The thread co-owns the state, so it stays valid if the thread is detached.
    state_->thread = std::thread([state = state_] { Loop(*state).run(); });
    state_->thread_id = state_->thread.get_id();
  }
  return Subscription([weak = std::weak_ptr<watch::SharedState>(state_), id] { cancel(weak, id); });
}

}  // namespace dlock::detail
