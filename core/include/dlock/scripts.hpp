#pragma once
// The Lua scripts that make a lock atomic, and the runner that sends
// them by EVALSHA. Every user value travels in KEYS/ARGV, never in the text.
// The scripts' text is core/scripts/lock/*.lua (a comment per branch there),
// embedded at build time; the runner is core/src/redis/script_runner.cpp, and
// over a Redlock core/src/quorum/quorum_runner.cpp.
//
// Reply shapes (the core parses them in lock_service.cpp). The five keys are
// LockNames::script_keys(): lock, fence, queue, alive, turn; the scripts name
// the channel themselves. Replies on the paths every lock takes are scalars:
// Redis converts a table reply field by field, at the cost of several calls.
//   acquire(five keys; id, lease_ms, "wait_ms window_ms retention_ms[ arrival_us]")
//       → fencing token (integer > 0, or text past 2^53) | -1 - ms the caller may sleep at most (-1: no lease)
//   release(five keys; id, "window_ms retention_ms"[, "candidate its_lease_ms may_bypass"])
//       → 0 not this acquisition's | text: freed, naming the waiter told ('' none) | {token} handed to the candidate
//   renew(lock; id, lease_ms[, hold count]) → 1 renewed (count set) | 0 gone
//   renew_many(locks; id, lease_ms for each) → {1 renewed | 0 gone, ...} in the locks' order
//   leave(five keys; id, window_ms) → 1 (also frees a hold granted to it unawares)
//   keep_in_line(five keys; window_ms, id...) → {the free lock's live head told of its turn ('' none), ids not in line...}
//   force_release(five keys; window_ms) → the owners removed, {token, count, ...}
//   raise_fence(lock, fence; id, token, retention_ms) → 1 raised | 0 not held (Redlock only)
// A key of the wrong type at a lock's name is an error reply starting "DLOCK_WRONGTYPE".
//
// Identity: every first acquisition has an id of its own, `<instance>:<thread>:<n>`,
// the field of its hold in the lock's hash. Re-entry is decided by the thread
// (the client finds its own hold and renews it with the new count), so Redis
// tells apart a retried call (the same id: its grant is adopted, once) from a
// new one (a new id: it waits like anyone, even behind a lock its own thread
// detached), and a renewal in flight never extends a later acquisition.
//
// Waiters line up by arrival and stay in line while they are heard from (see
// core/scripts/prelude.lua); while the lock is free it is the oldest live waiter's, however
// it became free. A releaser with a waiter of its own process asleep in line
// may instead grant the lock to it inside the release (it is known to be
// alive), at most a few times in a row ahead of older waiters of other processes.

#include <chrono>
#include <cstdint>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/detail/owed_replies.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::detail {

struct NodeAnswer;  // quorum.hpp

struct Script {
  std::string_view name;
  std::string source;
};

extern const Script kAcquireScript;
extern const Script kReleaseScript;
extern const Script kRenewScript;
extern const Script kRenewManyScript;
extern const Script kLeaveScript;
extern const Script kKeepInLineScript;
extern const Script kForceReleaseScript;
extern const Script kRaiseFenceScript;

// Error replies of the scripts start with this, then the key's actual type.
inline constexpr std::string_view kWrongTypeError = "DLOCK_WRONGTYPE";

// lock.replica_acks: after a script's writes, WAIT on the connection that
// made them until this many replicas have them, at most `timeout`.
struct ReplicaAcknowledgement {
  int replicas = 0;  // 0: no WAIT
  std::chrono::milliseconds timeout{100};
};

// One call of a script in ScriptRunner::run_pipelined: views of the caller's strings,
// which must outlive the run.
struct ScriptCall {
  std::vector<std::string_view> keys;
  std::vector<std::string_view> args;
};

// Error replies standing for a call whose writes too few replicas acknowledged.
inline constexpr std::string_view kNotAcknowledgedError = "DLOCK_NOT_ACKNOWLEDGED";

// Runs scripts by SHA. The SHA of each script is learnt from SCRIPT LOAD;
// after a NOSCRIPT (Redis restarted, SCRIPT FLUSH) the script is loaded again
// and the call retried once. Thread-safe.
class ScriptRunner {
 public:
  // Over a Redlock (redis.quorum_nodes() not empty), every script goes to
  // every node at once and the nodes' replies are made one by quorum.hpp's
  // rules; an acquire that no majority granted is given back on every node
  // that may have granted it before its reply is returned.
  explicit ScriptRunner(RedisExecutor& redis, ReplicaAcknowledgement acknowledgement = {});

  // Loads every script now; throws ConnectionError when Redis is unreachable.
  void load_all();

  RedisReply run(const Script& script, std::span<const std::string_view> keys, std::span<const std::string_view> args);

  // As run(), and with lock.replica_acks set, WAIT right after it in the same
  // round trip: a reply whose writes fewer replicas acknowledged comes back
  // as an error reply starting with kNotAcknowledgedError (the writes stand
  // on the master; the caller undoes them if it must).
  // `must_reach_replicas` says which replies stand for writes that count
  // only when acknowledged (default: every reply that is not an error).
  using ReplyTest = bool (*)(const RedisReply&);
  RedisReply run_acknowledged(const Script& script, std::span<const std::string_view> keys,
                              std::span<const std::string_view> args, ReplyTest must_reach_replicas = nullptr);

  // Sends the script now and returns without its reply (RedisExecutor::start),
  // for a release whose reply nobody waits for. Null over a Redlock or with
  // lock.replica_acks: their calls are run(). A NOSCRIPT reply is the reader's
  // to retry with run(). `keys` and `args` need not outlive the call.
  std::unique_ptr<PendingReply> start(const Script& script, std::span<const std::string_view> keys,
                                      std::span<const std::string_view> args);
  // As run(), on the connection `before` was sent on and after its command,
  // without waiting for `before`'s reply first: Redis runs the two in that
  // order, whenever it reads them. `before`'s reply goes to `on_before`
  // (none if it never came: timed out, connection lost) before this call's
  // is read, whether or not this call then throws ConnectionError. `before`
  // is spent afterwards.
  using BeforeReply = std::function<void(std::optional<RedisReply>)>;
  RedisReply run_after(PendingReply& before, const BeforeReply& on_before, const Script& script,
                       std::span<const std::string_view> keys, std::span<const std::string_view> args);

  // Loads `script` unless it was loaded before: a later start() of it then
  // sends at once, with no load to wait for (a release must not wait on a
  // stalled Redis).
  void preload(const Script& script) { (void)sha_of(script); }

  // Whether Redis answered NOSCRIPT (restarted, SCRIPT FLUSH): the call did not run.
  static bool is_noscript(const RedisReply& reply);

  bool acknowledges() const { return acknowledgement_.replicas > 0; }
  // Whether the scripts run on a Redlock's nodes.
  bool quorum() const { return !nodes_.empty(); }

  // Which calls may share one script call: see RedisExecutor::script_group.
  std::uint32_t group_of(std::string_view key) const { return redis_.script_group(key); }

  // One round trip for many calls of the same script (the watchdog's
  // renewals), on the executor's urgent path, given up at `deadline`. With
  // lock.replica_acks set, a WAIT follows the last call of each script group
  // (group_of), and a call too few replicas acknowledged answers as
  // run_acknowledged says.
  // The calls' keys and arguments are sent without a copy where the executor
  // can (urgent_pipeline_parts).
  std::vector<RedisReply> run_pipelined(const Script& script, const std::vector<ScriptCall>& calls,
                                        std::chrono::steady_clock::time_point deadline);

 private:
  // Views that stay valid as long as the runner.
  std::string_view sha_of(const Script& script);
  std::string_view load(const Script& script);
  // Redlock: every script on every node; throws ConnectionError unless a majority loaded them.
  void load_on_quorum();
  // Redlock: the SHA, from the first node that has or loads the script.
  std::string_view learn_sha(const Script& script);
  static RedisCommand evalsha(std::string_view sha, std::span<const std::string_view> keys,
                              std::span<const std::string_view> args);
  // The commands of `calls` (groups[i]: call i's script group), with a WAIT
  // after each group's last call when acknowledgement is asked for.
  std::vector<RedisCommand> with_waits(std::vector<RedisCommand> calls, const std::vector<std::uint32_t>& groups) const;
  // The replies of with_waits' commands, one per call, each judged by its group's WAIT.
  std::vector<RedisReply> fold_waits(std::vector<RedisReply> replies, const std::vector<std::uint32_t>& groups,
                                     ReplyTest must_reach_replicas = nullptr) const;

  // Redlock: one runner per node, each loading the scripts on its own node.
  struct Node {
    RedisExecutor* redis;
    std::unique_ptr<ScriptRunner> scripts;
    std::string endpoint;
    // Until when (steady clock) calls skip the node: it just failed or stayed silent.
    std::unique_ptr<std::atomic<std::chrono::steady_clock::rep>> resting_until;
    // Replies it still owes to calls that stopped waiting: the next commands follow on their connections.
    std::unique_ptr<OwedReplies> owed;
  };
  // How long a Redlock node that failed is skipped before it is tried again.
  static constexpr std::chrono::milliseconds kNodeRest{1000};
  void rest(std::size_t node, std::chrono::steady_clock::time_point now);
  // Sends the call in `parts` to one node, or says in `answer` why not: a node
  // resting is skipped (but sent a call that `undoes` a grant after a reply it
  // still owes, which it will run after that reply's command), a node that
  // owes a reply is sent the call after it, on the same connection.
  std::unique_ptr<PendingReply> send_to_node(std::size_t node, std::span<const std::string_view> parts, bool undoes,
                                             NodeAnswer& answer);
  // Each node's reply to one call, sent to all before any is read.
  // Replies later than `give_up_at` count as none. Once `decided` holds, the
  // nodes still to answer are not waited for, unless `wait_for_all`; the
  // time it first held goes to `decided_at` (if given). The replies not
  // read go to `unread` (by node) if given, else the nodes keep them owed.
  using Decided = bool (*)(const std::vector<NodeAnswer>&);
  std::vector<NodeAnswer> ask_every_node(const Script& script, std::span<const std::string_view> keys,
                                         std::span<const std::string_view> args,
                                         std::chrono::steady_clock::time_point give_up_at, Decided decided,
                                         bool wait_for_all,
                                         std::optional<std::chrono::steady_clock::time_point>* decided_at,
                                         std::vector<std::unique_ptr<PendingReply>>* unread = nullptr);
  RedisReply run_on_quorum(const Script& script, std::span<const std::string_view> keys,
                           std::span<const std::string_view> args);
  // Gives back, on the nodes named, a grant of the acquisition in acquire's
  // `args` (best effort); waits only for nodes that `answered` the acquire.
  // A node whose reply is in `unread` is sent the release on that
  // connection, after the acquire: it cannot overtake it.
  void give_back(const std::vector<std::size_t>& nodes, const std::vector<bool>& answered,
                 std::span<const std::string_view> keys, std::span<const std::string_view> acquire_args,
                 std::vector<std::unique_ptr<PendingReply>>& unread);
  std::vector<RedisReply> run_pipelined_on_quorum(const Script& script, const std::vector<ScriptCall>& calls,
                                                  std::chrono::steady_clock::time_point deadline);

  RedisExecutor& redis_;
  const ReplicaAcknowledgement acknowledgement_;
  std::vector<Node> nodes_;  // empty unless a Redlock
  std::mutex mutex_;
  std::map<const Script*, std::string> shas_;  // guarded by mutex_; an entry, once made, never changes
};

}  // namespace dlock::detail
