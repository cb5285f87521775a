#pragma once
// The only door from core to Redis. core/ sends commands and subscribes to
// channels through this interface; integration/ implements it with hiredis.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

// One reply, decoupled from hiredis' structs so core never includes hiredis.
struct RedisReply {
  enum class Type { Nil, Integer, String, Status, Error, Array };
  Type type = Type::Nil;
  long long integer = 0;
  std::string str;  // String, Status and Error payload
  std::vector<RedisReply> elements;

  bool is_error() const { return type == Type::Error; }
  bool is_nil() const { return type == Type::Nil; }
};

using RedisCommand = std::vector<std::string>;

// Gets the payload of a published message; an empty one after an outage.
using MessageHandler = std::function<void(const std::string& message)>;

// A live subscription; destroying it (or calling reset) unsubscribes.
class Subscription {
 public:
  Subscription() = default;
  explicit Subscription(std::function<void()> cancel) : cancel_(std::move(cancel)) {}
  Subscription(Subscription&& other) noexcept : cancel_(std::move(other.cancel_)) { other.cancel_ = nullptr; }
  Subscription& operator=(Subscription&& other) noexcept {
    if (this != &other) {
      reset();
      cancel_ = std::move(other.cancel_);
      other.cancel_ = nullptr;
    }
    return *this;
  }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;
  ~Subscription() { reset(); }

  void reset() noexcept {
    if (cancel_) {
      auto cancel = std::move(cancel_);
      cancel_ = nullptr;
      cancel();
    }
  }
  explicit operator bool() const { return static_cast<bool>(cancel_); }

 private:
  std::function<void()> cancel_;
};

// A command on its way to one server: get() reads its reply. A caller that
// needs several servers' replies (Redlock) starts them all first, then reads
// them, in the time of the slowest round trip rather than their sum.
class PendingReply {
 public:
  virtual ~PendingReply() = default;
  // The reply, or ConnectionError as RedisExecutor::command throws it. Once.
  // Waits until the command timeout, or `give_up_at` if sooner.
  virtual RedisReply get(std::chrono::steady_clock::time_point give_up_at) = 0;
  RedisReply get() { return get(std::chrono::steady_clock::time_point::max()); }
  // Without waiting: the reply if it has come, else none (ConnectionError as
  // get()). After a reply came, get() returns it.
  virtual std::optional<RedisReply> take_if_arrived() { return get(); }
  // A descriptor that turns readable when more of the reply comes (poll()),
  // or -1 if there is none to watch (the reply is already here).
  virtual int ready_fd() const { return -1; }
  // When get() would give up waiting (after a then(), when the oldest reply
  // still to come on the connection is due).
  virtual std::chrono::steady_clock::time_point due() const { return std::chrono::steady_clock::time_point::max(); }
  // Sends argv now on this reply's connection and returns its reply, read
  // after this one, which is discarded unread: the server runs one
  // connection's commands in order, so argv runs after this reply's command
  // (a release after the acquire it undoes), whenever the server runs them.
  // This object is spent afterwards (only destroyed). Null if the connection
  // cannot carry one more (none of its own, or too many replies still owed:
  // a cap that an `undoing` command, a release or a give-back, passes, since
  // it is bounded by the grants it undoes and must reach the node);
  // throws ConnectionError if sending failed.
  virtual std::unique_ptr<PendingReply> then(std::span<const std::string_view> argv, bool undoing = false) {
    (void)argv;
    (void)undoing;
    return nullptr;
  }
  // As then(), but this reply is kept, not discarded: once the returned
  // object's get() or take_if_arrived() has read past it, its earlier()
  // gives it. For a command sent without waiting (a release) that the next
  // command on the same key must follow, without waiting for it first.
  virtual std::unique_ptr<PendingReply> then_keeping(std::span<const std::string_view> argv) {
    (void)argv;
    return nullptr;
  }
  // After then_keeping(): the reply it kept, if read past; none otherwise
  // (not yet read, or the connection failed before it came).
  virtual std::optional<RedisReply> earlier() { return std::nullopt; }
};

class RedisExecutor {
 public:
  virtual ~RedisExecutor() = default;

  // Sends one command and returns its reply. An error reply from Redis comes
  // back as a reply of Type::Error; only transport failures (unreachable,
  // timed out, connection dropped) throw, as ConnectionError. Thread-safe.
  virtual RedisReply command(const RedisCommand& argv) = 0;

  // As command(), with the parts given as views, for callers on a hot path:
  // an executor that can send them without copying overrides this. The
  // default copies them into a RedisCommand.
  virtual RedisReply command_parts(std::span<const std::string_view> argv) {
    return command(RedisCommand(argv.begin(), argv.end()));
  }

  // Sends argv now and returns without its reply (see PendingReply). Throws
  // ConnectionError as command() does, here or from get(). The default runs
  // the command to the end at once: correct, but not parallel.
  virtual std::unique_ptr<PendingReply> start(std::span<const std::string_view> argv);

  // Sends the commands in one round trip and returns their replies in order.
  // Throws ConnectionError as command() does. Thread-safe. An executor over
  // several servers (Cluster) sends each server its share; when one failed
  // midway and others answered, that one's commands get an error reply
  // starting "DLOCK_UNREACHABLE" instead of an exception.
  virtual std::vector<RedisReply> pipeline(const std::vector<RedisCommand>& commands) = 0;

  // As pipeline(), for the watchdog's renewals: never queued behind other
  // callers for a connection (an executor keeps one aside for it), and given
  // up with ConnectionError at `deadline` whatever the configured timeouts,
  // so that a lock is declared lost by its holder's clock on time even while
  // Redis is unreachable. The default simply calls pipeline().
  virtual std::vector<RedisReply> urgent_pipeline(const std::vector<RedisCommand>& commands,
                                                  std::chrono::steady_clock::time_point deadline) {
    (void)deadline;
    return pipeline(commands);
  }

  // As urgent_pipeline(), each command's parts views of the caller's strings: the
  // watchdog renews a million held locks a round at a time without copying their
  // names and owners. An executor that can send them without copying overrides
  // this; the default copies them into RedisCommands.
  virtual std::vector<RedisReply> urgent_pipeline_parts(std::span<const std::span<const std::string_view>> commands,
                                                        std::chrono::steady_clock::time_point deadline) {
    std::vector<RedisCommand> copies;
    copies.reserve(commands.size());
    for (const auto& parts : commands) copies.emplace_back(parts.begin(), parts.end());
    return urgent_pipeline(copies, deadline);
  }

  // Calls on_message with the payload of every message published on channel,
  // and once more, with an empty payload, after the subscriber connection
  // came back from an outage (a message may have been missed meanwhile).
  // Returns once Redis confirmed the subscription, or after `confirm_within`
  // (default: the command timeout) without it; waiters must not rely on
  // messages alone. on_message runs on the subscriber's thread and must not block.
  virtual Subscription subscribe(const std::string& channel, MessageHandler on_message,
                                 std::optional<std::chrono::milliseconds> confirm_within = std::nullopt) = 0;

  // "host:port", for messages.
  virtual std::string endpoint() const = 0;

  // Script calls whose keys are in the same group may be packed into one call
  // (the watchdog's renew_many): a Redis Cluster's hash slot, since one
  // script's keys must share a slot there; 0 for every key of one server.
  virtual std::uint32_t script_group(std::string_view key) const {
    (void)key;
    return 0;
  }

  // For what is per server rather than per key (SCAN's cursor): calls `visit`
  // once for each master with an executor that sends everything to that
  // master alone (subscribe() excepted). One server: `visit(*this)`.
  // Throws ConnectionError as command() does.
  virtual void for_each_master(const std::function<void(RedisExecutor& master)>& visit) { visit(*this); }

  // Redlock: the independent masters every lock is taken on, a majority of
  // them deciding (the quorum's rules are the core's, see quorum.hpp); empty
  // for one logical server (standalone, Sentinel, Cluster).
  virtual std::vector<RedisExecutor*> quorum_nodes() { return {}; }

  // Of a quorum node: whether its grants may count toward a majority now. A
  // node that restarted empty may have forgotten locks it granted; it sits
  // out one longest lease (redis.redlock.restarted_node_delay_ms).
  virtual bool may_vote() { return true; }
  // Of a quorum node that may not vote: how much of its delay is left, by
  // the last reading of its uptime; zero when it votes, or while its uptime
  // is being read again.
  virtual std::chrono::milliseconds sits_out_for() { return std::chrono::milliseconds(0); }

  // A master this executor sends to may have forgotten what it held: it
  // restarted (its run_id changed, or could not be read), or another server
  // took its place (a failover). `what` says which and where, for the log.
  using ResetHandler = std::function<void(const std::string& what)>;

  // Calls `on_reset` once for each such reset, as soon as that master answers
  // again (the watchdog then renews every lock it holds at once, rather than
  // at each lock's next renewal). It runs on a thread of the executor's and
  // must not block. Destroying the returned Subscription stops the calls,
  // waiting out one in progress (except from inside it). The default never
  // calls: an executor that cannot tell leaves holders to learn at their next renewal.
  virtual Subscription watch_resets(ResetHandler on_reset) {
    (void)on_reset;
    return {};
  }
};

}  // namespace dlock
