#pragma once
// Redlock's rules: how the answers of N independent masters to one script
// call make the one reply the core reads, as a single server would have given
// it. A lock is had when a majority (N/2 + 1) of the nodes that may vote
// granted it; it is known not had, renewed or owned once so many nodes said
// no that a majority is out of reach; anything in between is undecided, and
// the call is answered as an outage (ConnectionError) or with the first
// node's error reply, so that the core waits it out as it does one server's.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// Error replies of a call (or of one lock of renew_many) that no majority decided.
inline constexpr std::string_view kNoQuorumError = "DLOCK_NO_QUORUM";

struct NodeAnswer {
  std::string endpoint;
  std::optional<RedisReply> reply;  // none: the node gave no reply (unreachable, timed out)
  std::string failure;              // why, when there is no reply
  bool votes = true;                // whether its grants count now (RedisExecutor::may_vote)
  std::chrono::milliseconds sits_out_for{0};  // when it does not vote: how long still (RedisExecutor::sits_out_for)
  bool sent = true;                 // whether the call reached the node's socket (false: skipped, or sending failed)
  bool login_refused = false;       // the failure was a refused login (AuthenticationError): waiting will not end it
};

inline std::size_t majority_of(std::size_t nodes) { return nodes / 2 + 1; }

// acquire: the largest fencing token of the granting majority; otherwise the
// smallest nap among the nodes that said busy (`jitter_ms` when none did),
// with `to_undo` naming the nodes whose grant must be given back (those that
// granted, and those whose reply was lost). `validity_spent`: the round trip
// took the whole validity, so even a majority's grant is not had (an outage:
// the nodes are too slow for the lease).
struct AcquireOutcome {
  RedisReply reply;
  std::vector<std::size_t> to_undo;
  std::optional<std::string> outage;  // undecided for want of answers: the ConnectionError's message
  // The outage is for want of voters: enough nodes answered, too few may vote
  // yet (RestartDelayError); when enough will have sat out their delay.
  std::optional<std::chrono::system_clock::time_point> votes_from;
};
AcquireOutcome combine_acquire(const std::vector<NodeAnswer>& answers, bool validity_spent, long long jitter_ms);

// release: freed (the first waiter named, as text) when the nodes that freed
// it or could not say make a majority; 0 (not this acquisition's) when most
// said so. renew: 1 or 0 likewise. leave: 1 if any node answered.
// force_release: the owners any node removed. Undecided: the first error
// reply, or a ConnectionError naming every node that did not answer.
RedisReply combine_release(const std::vector<NodeAnswer>& answers);
// `what` names the call in messages ("renew the lock", "raise the fencing token").
RedisReply combine_renew(const std::vector<NodeAnswer>& answers, std::string_view what);
RedisReply combine_leave(const std::vector<NodeAnswer>& answers);
RedisReply combine_force_release(const std::vector<NodeAnswer>& answers);
// renew_many: lock by lock as renew, an undecided lock answered with an
// error reply starting kNoQuorumError (the watchdog retries it).
RedisReply combine_renew_many(const std::vector<NodeAnswer>& answers, std::size_t locks);

// "k of N nodes answered (a majority is M): endpoint: failure; ...", for messages.
std::string quorum_summary(const std::vector<NodeAnswer>& answers);

}  // namespace dlock::detail
