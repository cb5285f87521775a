// Fencing tokens: a hold's token, over a Redlock first raised on a majority
// of its nodes so that no later holder can draw a smaller one.
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "dlock/detail/service_core.hpp"
#include "dlock/errors.hpp"
#include "lock/script_replies.hpp"

namespace dlock::detail {

std::uint64_t ServiceCore::fencing_token(const Hold& hold) {
  const std::shared_ptr<HeldLock>& lock = hold.lock;
  if (!scripts_.quorum() || lock->fence_raised.load()) return lock->fencing_token;
  std::unique_lock io(lock->io);
  if (lock->fence_raised.load()) return lock->fencing_token;
  const std::string lost_message = lock->label() +
                                   " was lost before its fencing token could be raised on a majority of the Redlock's "
                                   "nodes; the token must not be used: a later holder may hold a larger one";
  if (hold.released.load() || lock->is_lost()) throw LockLostError(lost_message);
  const LockNames names = names_for(lock->key);
  const std::string token = std::to_string(lock->fencing_token);
  const std::string retention = std::to_string(config_.fence_retention.count());
  const std::array<std::string_view, 2> keys{names.lock(), names.fence()};
  const std::array<std::string_view, 3> args{lock->owner, token, retention};
  RedisReply reply;
  try {
    reply = scripts_.run(kRaiseFenceScript, keys, args);
    throw_if_transient(lock->key, reply, "raise the fencing token");
  } catch (const ConnectionError& e) {
    throw ConnectionError(lock->label() + ": its fencing token could not be raised on a majority of the "
                          "Redlock's nodes, so it is not handed out; try again: " + std::string(e.what()));
  }
  if (is_integer(reply, 1)) {
    lock->fence_raised = true;
    return lock->fencing_token;
  }
  if (is_integer(reply, 0)) {
    io.unlock();
    handle_lost(lock, "raising its fencing token found it held by no majority");
    throw LockLostError(lost_message);
  }
  throw_reply_error(lock->key, names, reply, "raise the fencing token");
}

}  // namespace dlock::detail
