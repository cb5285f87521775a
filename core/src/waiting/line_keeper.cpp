// The line keeper: every third of the turn window, while any of this
// service's waiters stands in a kept line, one keep_in_line script per line
// renews all of them at once (core/scripts/lock/keep_in_line.lua).
//
// Why: a waiter had to renew its own place in line at least every third of
// the window, each with a try of its own: 10,000 waiting coroutines asked for
// 30,000 scripts/s, more than the I/O threads could send, and their places
// lapsed. Renewed here, a kept waiter sleeps to the holder's lease or its
// wait, and a line costs one round trip per period whatever its length. The
// script also names the head of a free lock, which the keeper wakes if it is
// one of its own: a lost release notice costs a head no more than a period.
#include <algorithm>
#include <vector>

#include "dlock/detail/key_label.hpp"
#include "dlock/detail/service_core.hpp"
#include "dlock/detail/transient_state.hpp"
#include "dlock/errors.hpp"

namespace dlock::detail {
namespace {

// Ids per script call: one call's arguments stay well under what a reply reader or a slow link minds.
constexpr std::size_t kIdsPerCall = 2000;

}  // namespace

void ServiceCore::keep_lines_soon() { keep_lines_at(Clock::now() + config_.turn_window / 3); }

void ServiceCore::keep_lines_at(Clock::time_point when) {
  {
    std::lock_guard lock(keeper_mutex_);
    if (keeper_running_) return;
    keeper_running_ = true;
  }
  std::weak_ptr<ServiceCore> weak = weak_from_this();
  io_threads_.at(when, [weak] {
    if (auto self = weak.lock()) self->io_threads_.post([weak] {
        if (auto core = weak.lock()) core->keep_lines();
      });
  });
}

void ServiceCore::keep_lines() {
  // The next round a third of a window after this one began, not ended: a waiter that joined just after this
  // round's snapshot is renewed within a third of a window and two one-way trips of its joining, as a waiter
  // renewing its own place would be, even where a round trip is slow.
  const Clock::time_point next = Clock::now() + config_.turn_window / 3;
  const std::vector<WaiterTable::KeptLine> lines = waiters_.kept_lines();
  const std::string window_arg = std::to_string(config_.turn_window.count());
  for (const WaiterTable::KeptLine& line : lines) {
    const LockNames names = names_for(line.key);
    for (std::size_t first = 0; first < line.owners.size(); first += kIdsPerCall) {
      const std::size_t last = std::min(line.owners.size(), first + kIdsPerCall);
      std::vector<std::string_view> args;
      args.reserve(1 + last - first);
      args.push_back(window_arg);
      for (std::size_t i = first; i < last; ++i) args.push_back(line.owners[i]);
      try {
        const RedisReply reply = scripts_.run(kKeepInLineScript, names.script_keys(), args);
        if (reply.is_error() && transient_state(reply).empty()) {
          // A refusal that will not pass by itself (a key of another type at the lock's names): the waiters,
          // asleep to the holder's lease, try now and each reports it, as their own tries would have.
          logger_->debug("{}: renewing its waiters' places in line was refused: {}", lock_label(line.key), reply.str);
          waiters_.notify_each(line.channel, {line.owners.begin() + first, line.owners.begin() + last});
          continue;
        }
        if (reply.type != RedisReply::Type::Array || reply.elements.empty()) {
          // Redis loading, read-only in a failover: the next round tries again.
          logger_->debug("{}: renewing its waiters' places in line failed: {}", lock_label(line.key), reply.str);
          continue;
        }
        // The lock is free and its head alive: if the head is ours, it learns it now. Those no longer in
        // line (dropped while Redis could not be reached, or just served) try again: a dropped one joins anew.
        std::vector<std::string> wake;
        for (const RedisReply& id : reply.elements) {
          if (id.type == RedisReply::Type::String && !id.str.empty()) wake.push_back(id.str);
        }
        if (!wake.empty()) waiters_.notify_each(line.channel, wake);
      } catch (const Error& e) {
        // The waiters' own tries (at the latest at their lease's end) and the next period try again.
        logger_->debug("{}: renewing its waiters' places in line failed: {}", lock_label(line.key), e.what());
      }
    }
  }
  {
    std::lock_guard lock(keeper_mutex_);
    keeper_running_ = false;
  }
  if (!waiters_.kept_lines().empty()) keep_lines_at(std::max(next, Clock::now()));
}

}  // namespace dlock::detail
