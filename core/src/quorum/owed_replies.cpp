// A Redlock node's replies that calls stopped waiting for: kept, drained as they come, and
// the connection to send the next command on (see owed_replies.hpp for why).
#include "dlock/detail/owed_replies.hpp"

#include "dlock/detail/fork_guard.hpp"
#include "dlock/errors.hpp"

namespace dlock::detail {

OwedReplies::OwedReplies() : generation_(fork_generation()) {
  // Replies are read (without waiting) under the mutex; a child must not inherit it locked.
  hold_across_fork(mutex_);
}

OwedReplies::~OwedReplies() {
  {
    std::lock_guard lock(mutex_);
    forget_if_forked();
  }
  release_across_fork(mutex_);
}

void OwedReplies::forget_if_forked() {
  if (generation_ == fork_generation()) return;
  // The pool drops a connection made before the fork without a word sent on it.
  owed_.clear();
  generation_ = fork_generation();
}

void OwedReplies::keep(std::unique_ptr<PendingReply> reply) {
  if (!reply) return;
  std::lock_guard lock(mutex_);
  forget_if_forked();
  owed_.push_back(std::move(reply));
}

OwedReplies::Settled OwedReplies::settle(Clock::time_point now) {
  Settled settled;
  std::lock_guard lock(mutex_);
  forget_if_forked();
  for (auto it = owed_.begin(); it != owed_.end();) {
    try {
      if ((*it)->take_if_arrived()) {
        settled.answered = true;
        it = owed_.erase(it);  // in step again: the connection goes back to the pool
        continue;
      }
    } catch (const Error&) {
      settled.failed = true;
      it = owed_.erase(it);
      continue;
    }
    settled.owing = true;
    settled.silent = settled.silent || now >= (*it)->due();
    ++it;
  }
  return settled;
}

std::unique_ptr<PendingReply> OwedReplies::send_after(std::span<const std::string_view> argv, bool undoing,
                                                      bool& owing) {
  std::lock_guard lock(mutex_);
  forget_if_forked();
  owing = !owed_.empty();
  for (auto it = owed_.begin(); it != owed_.end(); ++it) {
    std::unique_ptr<PendingReply> next;
    try {
      next = (*it)->then(argv, undoing);
    } catch (const Error&) {
      owed_.erase(it);
      throw;
    }
    if (!next) continue;
    owed_.erase(it);  // spent: `next` carries its connection
    return next;
  }
  return nullptr;
}

}  // namespace dlock::detail
