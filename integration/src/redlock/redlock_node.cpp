// One Redlock node: a HiredisExecutor that reads the server's uptime and run_id (INFO
// server), so a node restarted within redis.redlock.restarted_node_delay_ms sits out votes.
#include <charconv>
#include <mutex>
#include <optional>

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
  State(RedisConfig config, Millis delay) : redis(std::move(config)), restarted_node_delay(delay) {}

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
    // Whole seconds, rounded down: the node may have run up to a second longer, never less.
    const Millis left = restarted_node_delay - std::chrono::seconds(*uptime);
    return Clock::now() + std::max(Millis(0), left);
  }

  // Reads the uptime if the pool opened a connection since the last reading
  // (one opened before it is read again: a restart breaks every connection).
  // The reading is made without the mutex: other callers are not held up by a slow node.
  void refresh() {
    const std::uint64_t opened = redis.connections_opened();
    {
      std::lock_guard lock(mutex);
      if (read_at_opened && *read_at_opened == opened) return;
    }
    const Clock::time_point from = read_voting_from();
    std::lock_guard lock(mutex);
    if (!read_at_opened || *read_at_opened < opened) {
      read_at_opened = opened;
      voting_from = from;
    }
  }

  HiredisExecutor redis;
  const Millis restarted_node_delay;
  std::mutex mutex;
  std::string run_id;                          // guarded by mutex: INFO server's, once read
  std::optional<std::uint64_t> read_at_opened;  // guarded by mutex: connections_opened() at the last reading
  Clock::time_point voting_from = Clock::time_point::max();  // guarded by mutex
};

RedlockNode::RedlockNode(RedisConfig node_config, Millis restarted_node_delay)
    : state_(std::make_unique<State>(std::move(node_config), restarted_node_delay)) {}

RedlockNode::~RedlockNode() = default;

void RedlockNode::connect() {
  state_->redis.connect();
  if (state_->restarted_node_delay > Millis(0)) {
    state_->refresh();
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
  try {
    state_->refresh();
  } catch (const Error&) {
    return false;  // not known not to have restarted: read again at the next vote
  }
  std::lock_guard lock(state_->mutex);
  return Clock::now() >= state_->voting_from;
}

RedisReply RedlockNode::command(const RedisCommand& argv) { return state_->redis.command(argv); }

RedisReply RedlockNode::command_parts(std::span<const std::string_view> argv) {
  return state_->redis.command_parts(argv);
}

std::unique_ptr<PendingReply> RedlockNode::start(std::span<const std::string_view> argv) {
  return state_->redis.start(argv);
}

std::vector<RedisReply> RedlockNode::pipeline(const std::vector<RedisCommand>& commands) {
  return state_->redis.pipeline(commands);
}

std::vector<RedisReply> RedlockNode::urgent_pipeline(const std::vector<RedisCommand>& commands,
                                                     std::chrono::steady_clock::time_point deadline) {
  return state_->redis.urgent_pipeline(commands, deadline);
}

Subscription RedlockNode::subscribe(const std::string& channel, MessageHandler on_message,
                                    std::optional<std::chrono::milliseconds> confirm_within) {
  return state_->redis.subscribe(channel, std::move(on_message), confirm_within);
}

std::string RedlockNode::endpoint() const { return state_->redis.endpoint(); }

}  // namespace dlock
