#pragma once
// The replies a Redlock node still owes to calls that stopped waiting for it
// (a majority had answered, or the call's own limit came). Their connections
// are kept rather than dropped, for two reasons:
// - a paused node is not dialled again by every call that follows (each new
//   connection would queue in its backlog, and run its command on waking);
//   the next call's command follows on the same connection instead;
// - a release sent after an acquire on the same connection runs after it
//   (Redis runs one connection's commands in order); on another connection
//   it could overtake the acquire and leave that grant for a lease.
// Thread-safe. A fork child never touches its parent's connections: it drops
// them unread, sending nothing.

#include <chrono>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "dlock/redis_executor.hpp"

namespace dlock::detail {

class OwedReplies {
 public:
  using Clock = std::chrono::steady_clock;

  OwedReplies();
  ~OwedReplies();
  OwedReplies(const OwedReplies&) = delete;
  OwedReplies& operator=(const OwedReplies&) = delete;

  // Keeps `reply` (if any) until the node sends it.
  void keep(std::unique_ptr<PendingReply> reply);

  // Without waiting: discards the replies that came and drops connections that failed.
  struct Settled {
    bool owing = false;  // a reply is still to come
    bool silent = false;  // one was due before `now`: the node said nothing for a whole command timeout
    bool failed = false;  // a connection failed
    bool answered = false;  // a reply owed came: the node answers again
  };
  Settled settle(Clock::time_point now);

  // Sends argv after one of the replies still owed, on its connection, and
  // returns its reply (the owed one discarded when it comes). Null when none
  // is owed or none can carry more (`undoing`: see PendingReply::then);
  // `owing` says whether one was owed.
  // Throws ConnectionError if sending failed (that connection is dropped).
  std::unique_ptr<PendingReply> send_after(std::span<const std::string_view> argv, bool undoing, bool& owing);

 private:
  // In a fork child: drops the parent's replies. Called with mutex_ held.
  void forget_if_forked();

  std::mutex mutex_;
  std::vector<std::unique_ptr<PendingReply>> owed_;  // guarded by mutex_
  unsigned generation_;                              // guarded by mutex_: fork_generation() of owed_
};

}  // namespace dlock::detail
