// lock.replica_acks: a WAIT after each script group's last call, and each
// call's reply judged by its group's WAIT.
#include "dlock/scripts.hpp"

#include <map>
#include <string>

namespace dlock::detail {

namespace {

// For each group, the place of its last call.
std::map<std::uint32_t, std::size_t> last_of_each(const std::vector<std::uint32_t>& groups) {
  std::map<std::uint32_t, std::size_t> last;
  for (std::size_t i = 0; i < groups.size(); ++i) last[groups[i]] = i;
  return last;
}

}  // namespace

std::vector<RedisCommand> ScriptRunner::with_waits(std::vector<RedisCommand> calls,
                                                   const std::vector<std::uint32_t>& groups) const {
  if (!acknowledges()) return calls;
  const RedisCommand wait{"WAIT", std::to_string(acknowledgement_.replicas),
                          std::to_string(acknowledgement_.timeout.count())};
  const auto last = last_of_each(groups);
  std::vector<RedisCommand> commands;
  commands.reserve(calls.size() + last.size());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    commands.push_back(std::move(calls[i]));
    if (last.at(groups[i]) == i) commands.push_back(wait);
  }
  return commands;
}

std::vector<RedisReply> ScriptRunner::fold_waits(std::vector<RedisReply> replies,
                                                 const std::vector<std::uint32_t>& groups,
                                                 ReplyTest must_reach_replicas) const {
  if (!acknowledges()) return replies;
  const auto last = last_of_each(groups);
  // Where each call's reply and each group's WAIT reply stand.
  std::vector<std::size_t> call_at(groups.size());
  std::map<std::uint32_t, std::size_t> wait_at;
  std::size_t at = 0;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    call_at[i] = at++;
    if (last.at(groups[i]) == i) wait_at[groups[i]] = at++;
  }
  if (replies.size() < at) return {};  // cut short: no call has a reply to stand on
  std::vector<RedisReply> folded;
  folded.reserve(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    RedisReply& call = replies[call_at[i]];
    const RedisReply& wait = replies[wait_at.at(groups[i])];
    // A call that failed wrote nothing worth waiting for: its own error stands.
    const bool counts = must_reach_replicas ? must_reach_replicas(call) : !call.is_error();
    if (counts && (wait.type != RedisReply::Type::Integer || wait.integer < acknowledgement_.replicas)) {
      const std::string acked =
          wait.type == RedisReply::Type::Integer ? std::to_string(wait.integer) : "WAIT refused: " + wait.str + ";";
      RedisReply refused;
      refused.type = RedisReply::Type::Error;
      refused.str = std::string(kNotAcknowledgedError) + " acknowledged by " + acked + " of the " +
                    std::to_string(acknowledgement_.replicas) + " replicas lock.replica_acks asks for within " +
                    std::to_string(acknowledgement_.timeout.count()) + " ms";
      folded.push_back(std::move(refused));
    } else {
      folded.push_back(std::move(call));
    }
  }
  return folded;
}

}  // namespace dlock::detail
