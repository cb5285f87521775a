// Redlock's rules applied: the nodes' answers to acquire, release, renew and the rest
// tallied into the one reply a single server would have given, or an outage.
#include "dlock/detail/quorum.hpp"

#include <algorithm>
#include <chrono>
#include <set>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "dlock/errors.hpp"

namespace dlock::detail {

namespace {

enum class Vote { yes, no, none };

struct Tally {
  std::size_t yes = 0;
  std::size_t no = 0;
  std::size_t nodes = 0;
  bool decided_yes() const { return yes >= majority_of(nodes); }
  // So many said no that the others could not make a majority.
  bool decided_no() const { return no > nodes - majority_of(nodes); }
};

template <typename Classify>
Tally tally(const std::vector<NodeAnswer>& answers, Classify classify) {
  Tally t;
  t.nodes = answers.size();
  for (const NodeAnswer& answer : answers) {
    if (!answer.reply) continue;
    const Vote vote = classify(*answer.reply);
    // A node that may have forgotten what it granted says nothing about who holds a lock.
    if (vote == Vote::yes && answer.votes) ++t.yes;
    if (vote == Vote::no) ++t.no;
  }
  return t;
}

bool is_token(const RedisReply& reply) {
  return (reply.type == RedisReply::Type::Integer && reply.integer > 0) || reply.type == RedisReply::Type::String;
}

// Tokens are decimal: an integer, or text past 2^53.
std::string token_digits(const RedisReply& reply) {
  return reply.type == RedisReply::Type::Integer ? std::to_string(reply.integer) : reply.str;
}

bool token_less(const RedisReply& a, const RedisReply& b) {
  const std::string x = token_digits(a);
  const std::string y = token_digits(b);
  return x.size() != y.size() ? x.size() < y.size() : x < y;
}

RedisReply integer_reply(long long value) {
  RedisReply reply;
  reply.type = RedisReply::Type::Integer;
  reply.integer = value;
  return reply;
}

RedisReply error_reply(std::string text) {
  RedisReply reply;
  reply.type = RedisReply::Type::Error;
  reply.str = std::move(text);
  return reply;
}

// The first node's error reply, naming the node; none if no node answered with one.
std::optional<RedisReply> first_error(const std::vector<NodeAnswer>& answers) {
  for (const NodeAnswer& answer : answers) {
    if (answer.reply && answer.reply->is_error()) {
      return error_reply(answer.reply->str + " (on redlock node " + answer.endpoint + "; " + quorum_summary(answers) +
                         ")");
    }
  }
  return std::nullopt;
}

// `what` is done by a majority, or known not to be: "yes from 1, no from 1, of 3 nodes".
std::string votes_of(const Tally& t, std::string_view yes, std::string_view no) {
  return std::string(yes) + " on " + std::to_string(t.yes) + ", " + std::string(no) + " on " + std::to_string(t.no);
}

RedisReply undecided(const std::vector<NodeAnswer>& answers, std::string_view what, const std::string& votes) {
  if (auto error = first_error(answers)) return *error;
  throw ConnectionError("redlock: no majority could " + std::string(what) + " (" + votes + "): " +
                        quorum_summary(answers) + "; check the nodes named (redis.redlock.nodes)");
}

// "12.3 s left", or "its uptime being read" while the node has not been read since it reconnected.
std::string delay_left(const NodeAnswer& answer) {
  if (answer.sits_out_for <= std::chrono::milliseconds(0)) return "its uptime being read";
  return fmt::format("{:.1f} s left", static_cast<double>(answer.sits_out_for.count()) / 1000.0);
}

// When enough of the nodes that granted but may not vote yet will have sat
// out their delay to make a majority with the votes counted now; none if
// they are too few (nodes are missing too: an outage, not only a delay).
std::optional<std::chrono::system_clock::time_point> votes_from(const std::vector<NodeAnswer>& answers,
                                                                const Tally& t) {
  std::vector<std::chrono::milliseconds> left;
  for (const NodeAnswer& answer : answers) {
    if (answer.reply && !answer.votes && is_token(*answer.reply)) left.push_back(answer.sits_out_for);
  }
  const std::size_t needed = majority_of(answers.size()) - (t.yes + t.no);
  if (left.empty() || left.size() < needed) return std::nullopt;
  std::sort(left.begin(), left.end());
  return std::chrono::system_clock::now() + left[needed - 1];
}

std::string utc_text(std::chrono::system_clock::time_point when) {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::chrono::system_clock::to_time_t(when)));
}

}  // namespace

std::string quorum_summary(const std::vector<NodeAnswer>& answers) {
  std::size_t answered = 0;
  std::string sitting_out;  // "host:port (12.3 s left)" of each node that answered but may not vote
  std::size_t sitting = 0;
  std::string missing;
  for (const NodeAnswer& answer : answers) {
    if (answer.reply) {
      ++answered;
      if (!answer.votes) {
        ++sitting;
        sitting_out += (sitting_out.empty() ? "" : ", ") + answer.endpoint + " (" + delay_left(answer) + ")";
      }
      continue;
    }
    missing += "; " + answer.endpoint + ": " + answer.failure;
  }
  std::string summary = std::to_string(answered) + " of " + std::to_string(answers.size()) +
                        " nodes answered (a majority is " + std::to_string(majority_of(answers.size())) + ")";
  if (sitting > 0) {
    summary += ", " + std::to_string(sitting) +
               " of them within their restart delay, not voting until they have been up "
               "redis.redlock.restarted_node_delay_ms: " + sitting_out;
  }
  return summary + missing;
}

AcquireOutcome combine_acquire(const std::vector<NodeAnswer>& answers, bool validity_spent, long long jitter_ms) {
  AcquireOutcome outcome;
  const Tally t = tally(answers, [](const RedisReply& r) {
    if (is_token(r)) return Vote::yes;
    return r.type == RedisReply::Type::Integer ? Vote::no : Vote::none;
  });
  if (t.decided_yes() && !validity_spent) {
    const RedisReply* largest = nullptr;
    for (const NodeAnswer& answer : answers) {
      if (answer.reply && answer.votes && is_token(*answer.reply) &&
          (!largest || token_less(*largest, *answer.reply))) {
        largest = &*answer.reply;
      }
    }
    outcome.reply = *largest;
    return outcome;
  }
  // Not had: every grant goes back, and so does whatever a lost reply may have granted.
  long long nap = -1;  // the shortest a busy node asked for; -1: none asked
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const auto& reply = answers[i].reply;
    if (!reply || is_token(*reply)) outcome.to_undo.push_back(i);
    if (reply && reply->type == RedisReply::Type::Integer && reply->integer < -1) {
      const long long asked = -1 - reply->integer;
      nap = nap < 0 ? asked : std::min(nap, asked);
    }
  }
  if (!t.decided_no() && !validity_spent) {
    // Undecided. An error reply is the core's to wait out (a passing state)
    // or report; too few voting nodes answered is an outage. Enough voters
    // answered, split between yes and no: busy, as a split vote below.
    if (auto error = first_error(answers)) {
      outcome.reply = *error;
      return outcome;
    }
    if (t.yes + t.no < majority_of(answers.size())) {
      outcome.outage = "redlock: no majority could grant the lock: " + quorum_summary(answers);
      outcome.votes_from = votes_from(answers, t);
      if (outcome.votes_from) {
        *outcome.outage += "; enough of them may vote from " + utc_text(*outcome.votes_from) +
                           ": try again then (a new deployment sits out the delay too; lower it only for nodes "
                           "that persist every write)";
      } else {
        *outcome.outage += "; check the nodes named (redis.redlock.nodes)";
      }
      return outcome;
    }
  }
  if (validity_spent) {
    outcome.outage = "redlock: the nodes answered too late: the lease's validity (lease - elapsed - drift) was spent "
                     "before a majority granted it; lower redis.command_timeout_ms, or use a longer lease";
    return outcome;
  }
  // Busy: sleep as the busy nodes ask (the core wakes on notices and
  // re-confirms its place meanwhile). No node asked (a split with nobody
  // else's lease in the way): try again at a time of one's own, so that the
  // split does not repeat.
  if (nap < 0) nap = jitter_ms;
  outcome.reply = integer_reply(-1 - nap);
  return outcome;
}

RedisReply combine_release(const std::vector<NodeAnswer>& answers) {
  const Tally t = tally(answers, [](const RedisReply& r) {
    if (r.type == RedisReply::Type::String || r.type == RedisReply::Type::Array) return Vote::yes;
    return r.type == RedisReply::Type::Integer && r.integer == 0 ? Vote::no : Vote::none;
  });
  if (t.decided_no()) return integer_reply(0);
  std::size_t could_have_held = 0;  // freed it, or could not say
  const RedisReply* named = nullptr;
  for (const NodeAnswer& answer : answers) {
    const bool said_no = answer.reply && answer.reply->type == RedisReply::Type::Integer && answer.reply->integer == 0;
    if (!said_no) ++could_have_held;
    if (answer.reply && answer.reply->type == RedisReply::Type::String &&
        (!named || (named->str.empty() && !answer.reply->str.empty()))) {
      named = &*answer.reply;
    }
  }
  if (named && could_have_held >= majority_of(answers.size())) return *named;
  return undecided(answers, "release the lock", votes_of(t, "freed", "not held"));
}

RedisReply combine_renew(const std::vector<NodeAnswer>& answers, std::string_view what) {
  const Tally t = tally(answers, [](const RedisReply& r) {
    if (r.type != RedisReply::Type::Integer) return Vote::none;
    return r.integer == 1 ? Vote::yes : r.integer == 0 ? Vote::no : Vote::none;
  });
  if (t.decided_yes()) return integer_reply(1);
  if (t.decided_no()) return integer_reply(0);
  return undecided(answers, what, votes_of(t, "held", "not held"));
}

RedisReply combine_leave(const std::vector<NodeAnswer>& answers) {
  for (const NodeAnswer& answer : answers) {
    if (answer.reply && !answer.reply->is_error()) return *answer.reply;
  }
  return undecided(answers, "take the waiter out of line", "no node answered");
}

RedisReply combine_force_release(const std::vector<NodeAnswer>& answers) {
  RedisReply owners;
  owners.type = RedisReply::Type::Array;
  std::set<std::string> seen;
  bool answered = false;
  for (const NodeAnswer& answer : answers) {
    if (!answer.reply || answer.reply->type != RedisReply::Type::Array) continue;
    answered = true;
    const auto& pairs = answer.reply->elements;
    for (std::size_t i = 0; i + 1 < pairs.size(); i += 2) {
      if (!seen.insert(pairs[i].str).second) continue;
      owners.elements.push_back(pairs[i]);
      owners.elements.push_back(pairs[i + 1]);
    }
  }
  if (answered) return owners;
  return undecided(answers, "force the release", "no node answered");
}

RedisReply combine_renew_many(const std::vector<NodeAnswer>& answers, std::size_t locks) {
  RedisReply combined;
  combined.type = RedisReply::Type::Array;
  combined.elements.reserve(locks);
  for (std::size_t lock = 0; lock < locks; ++lock) {
    // This lock's answer from each node: its element of the node's array.
    std::vector<NodeAnswer> per_lock;
    per_lock.reserve(answers.size());
    for (const NodeAnswer& answer : answers) {
      NodeAnswer one{answer.endpoint, std::nullopt, answer.failure, answer.votes, answer.sits_out_for};
      if (answer.reply && answer.reply->type == RedisReply::Type::Array && lock < answer.reply->elements.size()) {
        one.reply = answer.reply->elements[lock];
      } else if (answer.reply) {
        one.failure = answer.reply->is_error() ? answer.reply->str : "an unexpected reply";
      }
      per_lock.push_back(std::move(one));
    }
    try {
      combined.elements.push_back(combine_renew(per_lock, "renew the lock"));
    } catch (const ConnectionError& e) {
      combined.elements.push_back(error_reply(std::string(kNoQuorumError) + " " + e.what()));
    }
  }
  return combined;
}

}  // namespace dlock::detail
