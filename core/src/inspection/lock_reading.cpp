// read_lock_status: the status script's reply (one Redis', or the one a Redlock's majority
// agrees on) read into holders, lease, fencing token and line, or into the refusal it is.
#include "dlock/detail/lock_reading.hpp"

#include "dlock/detail/lock_names.hpp"
#include "dlock/detail/quorum_status.hpp"
#include "dlock/detail/reply_integer.hpp"

namespace dlock::detail {

LockReading read_lock_status(NodeScript& script, HolderDirectory& holders, const std::string& endpoint,
                             const LockConfig& config, std::string_view key) {
  const LockNames names(config.key_prefix, key);
  const std::string lock(names.lock()), fence(names.fence());
  LockReading reading;
  LockStatus& status = reading.status;
  status.lock_name = lock;
  const std::optional<RedisReply> agreed =
      decided_status(script.run({lock, fence, std::string(names.queue())}), script.quorum());
  if (!agreed) {
    reading.refusal = {no_majority_agrees(endpoint, script.nodes(), lock), true};
    return reading;
  }
  const RedisReply& reply = *agreed;
  if (reply.is_error() || reply.elements.size() != 4) {
    reading.refusal = refusal_of(endpoint, "cannot read " + lock, reply);
    return reading;
  }
  const RedisReply& hash = reply.elements[0];
  for (std::size_t i = 0; i + 1 < hash.elements.size(); i += 2) {
    status.holders.push_back(holders.holder(hash.elements[i].str, integer_of(hash.elements[i + 1]).value_or(0)));
  }
  if (status.held() && reply.elements[1].integer >= 0) status.lease_left = Millis(reply.elements[1].integer);
  status.waiters = integer_of(reply.elements[3]);
  const RedisReply& counter = reply.elements[2];
  if (!counter.is_nil()) {
    status.fencing_token = integer_of(counter);
    if (!status.fencing_token) {
      reading.refusal = {"redis " + endpoint + ": " + fence + " is not a fencing counter; another program uses "
                         "that name: delete it or choose another lock.key_prefix", false};
    }
  }
  return reading;
}

}  // namespace dlock::detail
