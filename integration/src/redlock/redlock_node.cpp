// One Redlock node: a HiredisExecutor that reads the server's uptime and run_id (INFO
// server), so a node restarted within redis.redlock.restarted_node_delay_ms sits out votes;
// after a reconnect the uptime is read again on a thread of the node's own.
#include <atomic>
#include <charconv>
#include <mutex>
#include <optional>
#include <thread>

#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"
#include "dlock/hiredis_executor.hpp"
#include "dlock/redlock_executor.hpp"

namespace dlock {

namespace {

using Clock = std::chrono::steady_clock;

// INFO server's uptime_in_seconds, or none if the reply has no such line.
std::optional<long long> uptime_seconds(const RedisReply& info) {
  constexpr std::string_view field = "uptime_in_seconds:";
  const std::size_t at = info.str.find(field);
  if (info.type != RedisReply::Type::String || at == std::string::npos) return std::nullopt;
  long long seconds = 0;
  const char* begin = info.str.data() + at + field.size();
  const auto [end, ec] = std::from_chars(begin, info.str.data() + info.str.size(), seconds);
  if (ec != std::errc() || end == begin) return std::nullopt;
  return seconds;
}

}  // namespace

struct RedlockNode::State {
  State(RedisConfig config, Millis delay)
      : silence_rest(std::max(config.command_timeout, config.connect_timeout)),
        redis(std::move(config)), restarted_node_delay(delay), generation(detail::fork_generation()) {
    // may_vote() takes it on every vote, the watchdog's too; a child must not inherit it locked.
    detail::hold_across_fork(mutex);
  }
  ~State() {
    std::thread last;
    {
      std::lock_guard lock(mutex);
      last = take_reader();
    }
    if (last.joinable()) last.join();
    detail::release_across_fork(mutex);
  }

  // The last reading's thread, to join; none in a fork child, which has no
  // thread of its parent's (that handle is left behind, never joined).
  // Called with mutex held.
  std::thread take_reader() {
    std::thread last = std::move(reader);
    if (last.joinable() && generation != detail::fork_generation()) (void)new std::thread(std::move(last));
    return last;
  }

  // From when the node may vote, by its uptime now. Throws ConnectionError,
  // or ConfigError if the node refuses INFO (the user's to fix).
  Clock::time_point read_voting_from() {
    const RedisReply info = redis.command({"INFO", "server"});
    if (const std::size_t at = info.str.find("run_id:"); info.type == RedisReply::Type::String && at != std::string::npos) {
      std::lock_guard lock(mutex);
      run_id = info.str.substr(at + 7, info.str.find_first_of("\r\n", at) - at - 7);
    }
    const std::optional<long long> uptime = uptime_seconds(info);
    if (!uptime) {
      throw ConfigError("redlock node " + redis.endpoint() + ": INFO server gave no uptime (" +
                            (info.is_error() ? info.str : std::string("unexpected reply")) +
                            "); dlock reads it to tell a node that restarted empty: grant the user INFO, or set "
                            "redis.redlock.restarted_node_delay_ms: 0 if every node persists each write");
    }
    // Redis counts uptime as the difference of two clock readings in whole
    // seconds (its start's and now's), so `1` may mean it started 10 ms ago:
    // the node may have run up to a second less than it says, and so it is
    // taken to have run one second less (a fresh node waits a second longer).
    const Millis left = restarted_node_delay - std::chrono::seconds(std::max(0LL, *uptime - 1));
    return Clock::now() + std::max(Millis(0), left);
  }

  // Reads the uptime and records it as of `opened` (connections_opened() before the reading).
  void read_as_of(std::uint64_t opened) {
    const Clock::time_point from = read_voting_from();
    std::lock_guard lock(mutex);
    if (!read_at_opened || *read_at_opened < opened) {
      read_at_opened = opened;
      voting_from = from;
    }
  }

  // Whether the node may vote now, by the last reading of its uptime. If the
  // pool opened a connection since (a restart breaks every connection), the
  // uptime is unknown: the node does not vote, and a reading is started on a
  // thread of its own, so that no caller (the watchdog's included) waits on a
  // slow node's INFO.
  bool votes_now() {
    const std::uint64_t opened = redis.connections_opened();
    std::lock_guard lock(mutex);
    if (read_at_opened && *read_at_opened == opened) return Clock::now() >= voting_from;
    const bool reading_here = reading && generation == detail::fork_generation();
    if (!reading_here && Clock::now() >= next_reading_at) start_reading();
    return false;
  }

  // How long the node still sits out by the last reading; zero if that
  // reading is stale (a connection opened since) or the delay has passed.
  Millis delay_left() {
    const std::uint64_t opened = redis.connections_opened();
    std::lock_guard lock(mutex);
    if (!read_at_opened || *read_at_opened != opened) return Millis(0);
    return std::max(Millis(0), std::chrono::ceil<Millis>(voting_from - Clock::now()));
  }

  // Called with mutex held.
  void start_reading() {
    std::thread previous = take_reader();
    reading = true;
    generation = detail::fork_generation();
    reader = std::thread([this, previous = std::move(previous)]() mutable {
      if (previous.joinable()) previous.join();  // it has finished: it cleared `reading`
      const std::uint64_t opened = redis.connections_opened();
      bool failed = false;
      try {
        read_as_of(opened);
      } catch (const Error&) {
        failed = true;  // not known not to have restarted: no vote, and read again at a later vote
      }
      std::lock_guard lock(mutex);
      reading = false;
      // A node that answers scripts but not INFO is not asked at every vote.
      if (failed) next_reading_at = Clock::now() + kReadingPause;
    });
  }

  static constexpr Millis kReadingPause{100};

  // Runs `call` (a command or pipeline), unless the node failed less than
  // silence_rest ago: then it says so at once. A paused node thus costs the
  // steps that follow each other (connect, SCRIPT LOAD, a read, a registry
  // look-up: the dlock command's, the start-up checks') one timeout
  // together, not one each.
  template <typename Call>
  auto unless_resting(Call call) {
    const Clock::rep failed = failed_at.load();
    if (failed != 0 && Clock::now() < Clock::time_point(Clock::duration(failed)) + silence_rest) {
      throw ConnectionError("redis " + redis.endpoint() + ": not asked: it failed to answer less than " +
                            std::to_string(silence_rest.count()) + " ms ago");
    }
    try {
      auto result = call();
      failed_at.store(0);
      return result;
    } catch (const ConnectionError&) {
      failed_at.store(Clock::now().time_since_epoch().count());
      throw;
    }
  }

  const Millis silence_rest;
  std::atomic<Clock::rep> failed_at{0};  // when a command last failed; 0: it answered since
  HiredisExecutor redis;
  const Millis restarted_node_delay;
  std::mutex mutex;
  std::string run_id;                          // guarded by mutex: INFO server's, once read
  std::optional<std::uint64_t> read_at_opened;  // guarded by mutex: connections_opened() at the last reading
  Clock::time_point voting_from = Clock::time_point::max();  // guarded by mutex
  bool reading = false;                        // guarded by mutex: a reading runs on `reader`
  Clock::time_point next_reading_at;           // guarded by mutex: after a failed reading
  std::thread reader;                          // guarded by mutex: the last reading's thread
  unsigned generation;                         // guarded by mutex: fork_generation() of `reader`
};

RedlockNode::RedlockNode(RedisConfig node_config, Millis restarted_node_delay)
    : state_(std::make_unique<State>(std::move(node_config), restarted_node_delay)) {}

RedlockNode::~RedlockNode() = default;

void RedlockNode::connect() {
  state_->unless_resting([this] {
    state_->redis.connect();
    return true;
  });
  if (state_->restarted_node_delay > Millis(0)) {
    // At start-up the reading is made here: the caller waits for the nodes anyway.
    state_->read_as_of(state_->redis.connections_opened());
    return;
  }
  try {
    (void)state_->read_voting_from();  // only for the run_id: no node may be listed twice
  } catch (const ConfigError&) {
    // INFO refused: with no restart rule, nothing else needs it.
  }
}

std::string RedlockNode::run_id() const {
  std::lock_guard lock(state_->mutex);
  return state_->run_id;
}

bool RedlockNode::may_vote() {
  if (state_->restarted_node_delay <= Millis(0)) return true;
  return state_->votes_now();
}

Millis RedlockNode::sits_out_for() {
  if (state_->restarted_node_delay <= Millis(0)) return Millis(0);
  return state_->delay_left();
}

RedisReply RedlockNode::command(const RedisCommand& argv) {
  return state_->unless_resting([&] { return state_->redis.command(argv); });
}

RedisReply RedlockNode::command_parts(std::span<const std::string_view> argv) {
  return state_->unless_resting([&] { return state_->redis.command_parts(argv); });
}

std::unique_ptr<PendingReply> RedlockNode::start(std::span<const std::string_view> argv) {
  return state_->redis.start(argv);
}

std::vector<RedisReply> RedlockNode::pipeline(const std::vector<RedisCommand>& commands) {
  return state_->unless_resting([&] { return state_->redis.pipeline(commands); });
}

std::vector<RedisReply> RedlockNode::urgent_pipeline(const std::vector<RedisCommand>& commands,
                                                     std::chrono::steady_clock::time_point deadline) {
  return state_->redis.urgent_pipeline(commands, deadline);
}

std::vector<RedisReply> RedlockNode::urgent_pipeline_parts(std::span<const std::span<const std::string_view>> commands,
                                                           std::chrono::steady_clock::time_point deadline) {
  return state_->redis.urgent_pipeline_parts(commands, deadline);
}

Subscription RedlockNode::subscribe(const std::string& channel, MessageHandler on_message,
                                    std::optional<std::chrono::milliseconds> confirm_within) {
  return state_->redis.subscribe(channel, std::move(on_message), confirm_within);
}

std::string RedlockNode::endpoint() const { return state_->redis.endpoint(); }

}  // namespace dlock
