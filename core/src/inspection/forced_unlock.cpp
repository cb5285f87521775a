// The lock's forced release run by NodeScript on one Redis or every node of a Redlock, the
// nodes' lists of removed owners tallied owner by owner, refusals a majority gave reported.
#include "dlock/detail/forced_unlock.hpp"

#include <algorithm>

#include "dlock/detail/lock_names.hpp"
#include "dlock/detail/quorum.hpp"
#include "dlock/scripts.hpp"
#include "dlock/detail/node_script.hpp"
#include "dlock/detail/quorum_status.hpp"
#include "dlock/detail/redis_refusal.hpp"
#include "dlock/detail/reply_integer.hpp"

namespace dlock {

bool ForcedUnlock::may_have_held(const RemovedOwner& owner) const {
  return owner.nodes + (nodes - answered) >= detail::majority_of(nodes);
}

bool ForcedUnlock::held_on_majority(const RemovedOwner& owner) const {
  return owner.nodes >= detail::majority_of(nodes);
}

bool ForcedUnlock::majority_answered() const { return answered >= detail::majority_of(nodes); }

bool ForcedUnlock::removed_holder() const {
  return std::any_of(owners.begin(), owners.end(), [&](const RemovedOwner& owner) { return may_have_held(owner); });
}

namespace detail {

ForcedUnlock force_unlock(RedisExecutor& redis, const LockConfig& config, std::string_view key) {
  const LockNames names(config.key_prefix, key);
  const auto keys = names.script_keys();
  NodeScript script(redis, kForceReleaseScript.source, "force an unlock");
  const std::vector<std::optional<RedisReply>> replies =
      script.run(std::vector<std::string>(keys.begin(), keys.end()), {std::to_string(config.turn_window.count())});
  const std::string what = "forced unlock of " + std::string(names.lock()) + " failed";
  // On one Redis its refusal; on a Redlock one a majority gave alike (a minority's leaves the others' work).
  if (const auto refused = agreed_refusal(replies, replies.size())) throw_refusal(redis.endpoint(), what, refused->str);
  ForcedUnlock done;
  done.nodes = replies.size();
  for (const auto& reply : replies) {
    if (!reply || reply->type != RedisReply::Type::Array) continue;
    ++done.answered;
    for (std::size_t i = 0; i + 1 < reply->elements.size(); i += 2) {
      const std::string& token = reply->elements[i].str;
      const long long count = integer_of(reply->elements[i + 1]).value_or(0);
      auto known = std::find_if(done.owners.begin(), done.owners.end(),
                                [&](const RemovedOwner& owner) { return owner.owner == token; });
      if (known == done.owners.end()) known = done.owners.insert(done.owners.end(), RemovedOwner{token, count, 0});
      known->hold_count = std::max(known->hold_count, count);
      ++known->nodes;
    }
  }
  return done;
}

}  // namespace detail
}  // namespace dlock
