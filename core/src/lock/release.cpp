// Release: a hold's release (inner or final), the final one's hand-off to a
// waiter of this process, unlock() by key, and retries through passing states.
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "dlock/detail/key_label.hpp"
#include "dlock/detail/transient_state.hpp"
#include "dlock/detail/service_core.hpp"
#include "dlock/errors.hpp"
#include "lock/script_replies.hpp"

namespace dlock::detail {
namespace {

// A sent call's reply, waited for (up to its command timeout); none if it never came.
std::optional<RedisReply> reply_now(PendingReply& pending) {
  try {
    return pending.get();
  } catch (const ConnectionError&) {
    return std::nullopt;
  }
}

// A releasing thread may grant the lock straight to a waiter of its own
// process, saving that waiter a round trip. In line order that is always
// fair; ahead of older waiters of other processes it is allowed only while
// the lock has passed within this process fewer than this many times in a
// row, so the oldest waiter in line is passed over at most this many times.
constexpr int kMaxLocalHandoffsInARow = 3;

}  // namespace

void ServiceCore::release(Hold& hold, Release how) {
  refuse_after_fork();
  if (hold.released.exchange(true)) return;
  const std::shared_ptr<HeldLock>& lock = hold.lock;
  std::unique_lock io(lock->io);
  bool final = false;
  bool detached = false;
  int holds_left = 0;
  {
    std::lock_guard guard(mutex_);
    holds_left = --lock->holds;
    std::erase_if(lock->stack, [&hold](const std::weak_ptr<Hold>& weak) {
      auto live = weak.lock();
      return !live || live.get() == &hold;
    });
    if (how == Release::locally_only) lock->detached = true;
    detached = lock->detached;
    final = holds_left == 0;
    if (final) {
      auto it = held_.find(lock->held_key);
      if (it != held_.end() && it->second == lock) held_.erase(it);
    }
  }
  // Before the release is sent, so no renewal can re-extend a released lock.
  if (final) watchdog_.unwatch(*lock);
  if (how == Release::locally_only) return;
  if (!lock->loss_claimed.load() && lock->is_lost()) {
    // Its validity ran out by this holder's clock and the watchdog, which gives
    // that verdict on a thread of its own, has not said so yet: the verdict
    // must not depend on which thread runs first.
    handle_lost(lock, "its lease ran out by the local clock before its release");
  }
  // loss_claimed, not lost_flag: another thread (the watchdog) may be reporting the loss right now,
  // and lost_flag is published only once it has; the release must not count as a success meanwhile.
  if (lock->loss_claimed.load()) {
    // Its hold may still be in Redis (a renewal that came too late, a grant
    // that arrived already expired by our clock): the release, owner-checked
    // by this acquisition's id, frees it now rather than a lease later, and
    // never touches a later owner's lock.
    if (final && !detached) release_quietly_after_loss(lock);
    throw LockLostError(lock->label() +
                        " was lost before this release (its lease ran out or it was taken over); another owner's "
                        "lock was left untouched; the critical section may have overlapped another holder");
  }
  if (!final) return release_inner(lock, holds_left);
  // A detached hold keeps the lock until its lease ends, whoever releases last.
  if (detached) return;
  release_final(lock, how != Release::without_waiting);
}

void ServiceCore::release_quietly_after_loss(const std::shared_ptr<HeldLock>& lock) {
  try {
    if (lock->own_release) {
      run_own_release(*lock);
      return;
    }
    const LockNames names = names_for(lock->key);
    const std::array<std::string_view, 2> args{lock->owner, line_settings_};
    scripts_.run(kReleaseScript, names.script_keys(), args);
  } catch (const Error& e) {
    logger_->debug("{}: releasing a hold that may have outlived its loss failed: {}", lock->label(), e.what());
  }
}

void ServiceCore::release_inner(const std::shared_ptr<HeldLock>& lock, int holds_left) {
  const std::string lease_arg = std::to_string(lock->lease_ms.load());
  const std::string count_arg = std::to_string(holds_left);
  const std::array<std::string_view, 1> keys{lock->lock_name};
  const std::array<std::string_view, 3> args{lock->owner, lease_arg, count_arg};
  const Clock::time_point sent = Clock::now();
  RedisReply reply;
  try {
    reply = retry_release(*lock, scripts_.run_acknowledged(kRenewScript, keys, args, &is_hold_kept), kRenewScript, keys,
                          args, &is_hold_kept);
    throw_if_transient(lock->key, reply, "release");
  } catch (const ConnectionError& e) {
    throw ConnectionError(std::string(e.what()) + "; " + lock->label() +
                          ": its hold count in Redis may be one too high until the outermost release, which frees "
                          "the lock all the same");
  }
  if (is_integer(reply, 0)) {
    handle_lost(lock, "an inner release found it no longer this owner's");
    throw LockLostError(lock->label() +
                        " was no longer this owner's at an inner release (its lease ran out or it was taken over); "
                        "the critical section may have overlapped another holder");
  }
  if (!is_hold_kept(reply) && !is_unacknowledged(reply)) {
    throw_reply_error(lock->key, names_for(lock->key), reply, "release");
  }
  stats_.released.fetch_add(1, std::memory_order_relaxed);
  // As for a re-entry: with lock.replica_acks only an acknowledged lease extends the validity.
  if (is_hold_kept(reply)) lock->extend_validity(sent, Millis(lock->lease_ms.load()));
}

std::string ServiceCore::unreleased_advice(const HeldLock& lock) const {
  return lock.label() + " may not be released: if the release did not run, " +
         (lock.own_release ? "its hold" : "the lock") + " expires by itself within its lease (" +
         std::to_string(lock.lease_ms.load()) + " ms); if it did, it was freed" +
         (lock.own_release ? "" : " or handed to the next waiter");
}

void ServiceCore::release_final(const std::shared_ptr<HeldLock>& lock, bool wait_for_reply) {
  if (lock->own_release) return release_own(lock, wait_for_reply);
  const LockNames names = names_for(lock->key);
  // A waiter of this process asleep in line is alive: the release may grant it the lock outright.
  // Not with lock.replica_acks: a lock handed over here would not be
  // acknowledged by its new holder; the next in line acquires it, and WAITs.
  // Nor over a Redlock: a hand-off is one node's decision, and the nodes would each hand it to their own head.
  WaiterTable::Offer offer = scripts_.acknowledges() || scripts_.quorum() ? WaiterTable::Offer()
                                                                           : waiters_.offer(names.channel(), lock->owner);
  std::string offer_arg =
      offer ? offer.owner() + ' ' + std::to_string(offer.lease_ms()) + ' ' +
                  (lock->handoffs_in_a_row < kMaxLocalHandoffsInARow ? '1' : '0')
            : std::string();
  const std::array<std::string_view, 3> args{lock->owner, line_settings_, offer_arg};
  // Without an offer, the script's plain form: two arguments.
  const std::span<const std::string_view> sent_args = offer ? std::span(args) : std::span(args).first(2);
  const Clock::time_point sent = Clock::now();
  RedisReply reply;
  try {
    // A release that may hand the lock to a waiter of this process is awaited: that waiter starts as soon as
    // the reply is read, not a sweep of the deferred thread later.
    if (!wait_for_reply && !offer) {
      // Null where a call cannot be left unread (a Redlock, replica acks): then the reply is awaited here.
      if (std::unique_ptr<PendingReply> pending = scripts_.start(kReleaseScript, names.script_keys(), sent_args)) {
        leave_release(std::make_unique<DeferredReleases::Release>(DeferredReleases::Release{
            std::string(names.lock()), lock, std::move(pending), std::move(offer), std::move(offer_arg), sent}));
        return;
      }
    }
    reply = scripts_.run(kReleaseScript, names.script_keys(), sent_args);
    if (!transient_state(reply).empty()) {
      // Nothing ran. The offered waiter must not sit out the retries (its
      // wait bounds it by one command, see Ticket::wait): it tries by itself.
      offer.decline();
      reply = retry_release(*lock, std::move(reply), kReleaseScript, names.script_keys(), std::span(args).first(2));
    }
    throw_if_transient(lock->key, reply, "release");
  } catch (const ConnectionError& e) {
    stats_.releases_failed.fetch_add(1, std::memory_order_relaxed);
    throw ConnectionError(std::string(e.what()) + "; " + unreleased_advice(*lock));
  }
  finish_final_release(lock, names, offer, reply, sent);
}

void ServiceCore::finish_final_release(const std::shared_ptr<HeldLock>& lock, const LockNames& names,
                                       WaiterTable::Offer& offer, const RedisReply& reply, Clock::time_point sent) {
  // Released: the waiter told of its turn ('' if none), as text. Handed
  // over to the offered waiter: {token}. Not this acquisition's: 0.
  const bool released = reply.type == RedisReply::Type::String;
  const bool not_owner = is_integer(reply, 0);
  const std::optional<std::uint64_t> handed_token =
      offer && reply.type == RedisReply::Type::Array && reply.elements.size() == 1 ? token_of(reply.elements[0])
                                                                                  : std::nullopt;
  // Settle the offer first: the waiter must not sit out what follows (a
  // lost-lock hook runs user code). Without a grant, it tries by itself.
  if (handed_token) {
    offer.grant({*handed_token, sent, lock->handoffs_in_a_row + 1});
  } else {
    offer.decline();
  }
  if (!released && !not_owner && !handed_token) {
    stats_.releases_failed.fetch_add(1, std::memory_order_relaxed);
    throw_reply_error(lock->key, names, reply, "release");
  }
  if (not_owner) {
    handle_lost(lock, "release found it was no longer this owner's");
    throw LockLostError(lock->label() +
                        " was no longer this owner's when released (its lease ran out or it was taken over); the "
                        "new owner's lock was left untouched; the critical section may have overlapped another holder");
  }
  stats_.released.fetch_add(1, std::memory_order_relaxed);
  if (released && !reply.str.empty()) {
    // The next turn may be a waiter of this process: wake it now rather than after the notice's round trip.
    waiters_.notify(names.channel(), reply.str);
  }
}

std::unique_ptr<DeferredReleases::Release> ServiceCore::settle_deferred_release(
    std::unique_ptr<DeferredReleases::Release> release, std::optional<RedisReply> reply, bool on_deferred_thread) noexcept {
  const std::shared_ptr<HeldLock> lock = release->lock;
  // Its reply is read: the connection goes back to the pool now, for what follows (a reload) to use.
  release->pending.reset();
  try {
    try {
      // After a restart or SCRIPT FLUSH: the script is loaded and the release sent again (one round trip).
      if (reply && ScriptRunner::is_noscript(*reply)) {
        try {
          reply = rerun_release(*lock, release->offer ? std::string_view(release->offer_arg) : std::string_view(),
                                on_deferred_thread);
        } catch (const ConnectionError& e) {
          // As a reply lost: a record's release is sent again below, a lock's is given up.
          logger_->debug("{}: running its release again after NOSCRIPT failed: {}", lock->label(), e.what());
          reply.reset();
        } catch (const Error& e) {
          // The script could not be loaded (NOPERM, OOM): it did not run.
          release->offer.decline();
          stats_.releases_failed.fetch_add(1, std::memory_order_relaxed);
          logger_->warn("{}: its release could not be run again after NOSCRIPT: {}; {}", lock->label(), e.what(),
                        unreleased_advice(*lock));
          return nullptr;
        }
      }
      const Clock::time_point now = Clock::now();
      // While the hold's validity lasts (nobody renews it now), else given up below, as retry_release.
      const bool valid_after_pause = now + release->pause < lock->valid_until_time();
      const auto send_again_later = [&release, now] {
        // The offered waiter must not sit out the sends again: it tries by itself.
        release->offer.decline();
        release->offer_arg.clear();
        release->send_again_at = now + release->pause;
        release->pause = std::min(release->pause * 2, kOutageRetry);
      };
      // A record's release whose reply was lost is sent again, as when it is awaited (release_own): left
      // undone, its permits or read-write hold would stay taken a whole lease, and every waiter with them.
      if (!reply && lock->own_release && release->resends_left > 0 && valid_after_pause && !deferred_.draining()) {
        --release->resends_left;
        release->maybe_ran = true;
        send_again_later();
        return release;
      }
      if (!reply) {
        throw ConnectionError("redis " + redis_->endpoint() + ": the release got no reply within the command timeout "
                              "(redis.command_timeout_ms), or its connection was lost");
      }
      // Nothing ran: sent again later.
      if (!transient_state(*reply).empty() && valid_after_pause) {
        send_again_later();
        return release;
      }
      throw_if_transient(lock->key, *reply, "release");
    } catch (const ConnectionError& e) {
      release->offer.decline();
      stats_.releases_failed.fetch_add(1, std::memory_order_relaxed);
      logger_->warn("{}; {}", e.what(), unreleased_advice(*lock));
      return nullptr;
    }
    if (lock->own_release) {
      try {
        finish_own_release(lock, *reply, release->maybe_ran);
      } catch (const ConnectionError& e) {
        logger_->warn("{}", e.what());  // its reply lost, a later send found it gone: counted failed, not lost
      }
    } else {
      finish_final_release(lock, names_for(lock->key), release->offer, *reply, release->sent);
    }
  } catch (const LockLostError&) {
    // Reported already (the log line, stats().lost, on_lost), as a loss the watchdog finds.
  } catch (const std::exception& e) {
    release->offer.decline();
    try {
      logger_->error("releasing {} (its reply read after the guard was gone) failed: {}", lock->label(), e.what());
    } catch (...) {
    }
  } catch (...) {
    release->offer.decline();
  }
  return nullptr;
}

std::optional<RedisReply> ServiceCore::send_release_again(DeferredReleases::Release& release) {
  release.sent = Clock::now();
  try {
    return rerun_release(*release.lock, {}, true);
  } catch (const ConnectionError& e) {
    logger_->debug("{}: sending its release again failed: {}", release.lock->label(), e.what());
    return std::nullopt;
  }
}

RedisReply ServiceCore::rerun_release(const HeldLock& lock, std::string_view offer_arg, bool reserved) {
  const Script* script = &kReleaseScript;
  std::vector<std::string_view> keys;
  std::vector<std::string_view> args{lock.owner};
  std::optional<LockNames> names;  // what a lock's keys view
  if (lock.own_release) {
    script = lock.own_release->script;
    keys.assign(lock.own_release->keys.begin(), lock.own_release->keys.end());
    args.emplace_back(lock.own_release->channel);
  } else {
    names.emplace(names_for(lock.key));
    const std::array<std::string_view, 5> lock_keys = names->script_keys();
    keys.assign(lock_keys.begin(), lock_keys.end());
    args.emplace_back(line_settings_);
    if (!offer_arg.empty()) args.emplace_back(offer_arg);
  }
  if (!reserved) return scripts_.run(*script, keys, args);
  // The watchdog's own connection, not the pool: the releases waiting for the deferred thread hold pooled
  // connections that only it gives back. Its command timeout bounds the wait, not this deadline.
  const std::vector<ScriptCall> call{{keys, args}};
  std::vector<RedisReply> replies = scripts_.run_pipelined(*script, call, Clock::now() + std::chrono::hours(1));
  if (replies.empty()) throw ConnectionError(lock.label() + ": no reply to its release");
  return std::move(replies.front());
}

RedisReply ServiceCore::run_after_releases(std::vector<std::unique_ptr<DeferredReleases::Release>> before,
                                           const Script& script, std::span<const std::string_view> keys,
                                           std::span<const std::string_view> args, ScriptRunner::ReplyTest is_grant) {
  bool release_ran_late = false;
  const auto settle = [this, &release_ran_late](std::unique_ptr<DeferredReleases::Release> release,
                                                std::optional<RedisReply> reply) {
    // A NOSCRIPT release is run again while it is settled, after the call that followed it.
    release_ran_late = release_ran_late || (reply && ScriptRunner::is_noscript(*reply));
    // A passing state is sent again by the deferred thread, not on this caller's time.
    keep_to_send_again(settle_deferred_release(std::move(release), std::move(reply), false));
  };
  for (std::size_t i = 0; i + 1 < before.size(); ++i) {
    std::optional<RedisReply> reply = reply_now(*before[i]->pending);
    settle(std::move(before[i]), std::move(reply));
  }
  std::unique_ptr<DeferredReleases::Release> last = std::move(before.back());
  PendingReply& release_sent = *last->pending;
  const ScriptRunner::BeforeReply on_last = [&settle, &last](std::optional<RedisReply> reply) {
    settle(std::move(last), std::move(reply));
  };
  RedisReply reply = scripts_.run_after(release_sent, on_last, script, keys, args);
  // That call found this process's own hold still there: it has been released since, so try once more.
  if (release_ran_late && !is_grant(reply)) reply = scripts_.run_acknowledged(script, keys, args, is_grant);
  return reply;
}

void ServiceCore::leave_release(std::unique_ptr<DeferredReleases::Release> release) {
  // A reply here already (an executor that cannot leave one unread), or a release of the same name still
  // pending (a lock broken by hand and retaken in this process; a key's write holds): read it now.
  if (release->pending->ready_fd() >= 0) release = deferred_.add(std::move(release));
  if (!release) return;
  std::optional<RedisReply> now = reply_now(*release->pending);
  keep_to_send_again(settle_deferred_release(std::move(release), std::move(now), false));
}

void ServiceCore::keep_to_send_again(std::unique_ptr<DeferredReleases::Release> release) {
  if (!release) return;
  release = deferred_.add(std::move(release));
  if (!release) return;
  stats_.releases_failed.fetch_add(1, std::memory_order_relaxed);
  logger_->warn("{}: its release must be sent again (a passing state, or its reply lost) and the service is ending; {}",
                release->lock->label(), unreleased_advice(*release->lock));
}

void ServiceCore::release_latest(std::string_view key, const std::optional<Owner>& owner) {
  refuse_after_fork();
  std::shared_ptr<Hold> latest;
  const std::string held = held_key(owner_token(owner), key);
  {
    std::lock_guard guard(mutex_);
    auto it = held_.find(held);
    if (it != held_.end()) {
      for (auto weak = it->second->stack.rbegin(); weak != it->second->stack.rend() && !latest; ++weak) {
        auto live = weak->lock();
        if (live && !live->released.load()) latest = std::move(live);
      }
    }
  }
  if (!latest) {
    throw NotOwnerError("unlock(" + lock_label(key) + "): " +
                        (owner ? "owner " + owner->str() + " holds" : std::string("the current thread holds")) +
                        " no hold of it; nothing was changed in Redis. Release " +
                        (owner ? "with the owner that took it" : "from the thread that took it") +
                        ", or through its LockGuard");
  }
  release(*latest);
}

RedisReply ServiceCore::retry_release(const HeldLock& lock, RedisReply reply, const Script& script,
                                      std::span<const std::string_view> keys, std::span<const std::string_view> args,
                                      ScriptRunner::ReplyTest acknowledged_if) {
  // Not retried, the lock would stay held for the rest of its lease (nobody
  // renews it once its release began), and every waiter with it: a slot
  // migration refuses each script naming a lock's absent line keys (TRYAGAIN)
  // for as long as it lasts.
  Millis pause{10};
  while (!transient_state(reply).empty() && Clock::now() + pause < lock.valid_until_time()) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kOutageRetry);
    reply = acknowledged_if ? scripts_.run_acknowledged(script, keys, args, acknowledged_if)
                            : scripts_.run(script, keys, args);
  }
  return reply;
}

}  // namespace dlock::detail
