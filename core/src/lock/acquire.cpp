// The acquire loop: a call's entry (re-entry first, else a new acquisition),
// its tries and its waits for a turn in line, a grant too few replicas
// acknowledged given back, and leaving the line on giving up.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "dlock/detail/key_label.hpp"
#include "dlock/detail/service_core.hpp"
#include "dlock/errors.hpp"
#include "lock/script_replies.hpp"

namespace dlock::detail {
namespace {

// A lock whose hash has no expiry (PERSISTed by hand) gives no PTTL to sleep
// on: retry on this period instead.
constexpr Millis kNoLeaseRetry{100};

// Whether an acquire script's reply is a grant: its token, an integer > 0 or text.
bool is_grant(const RedisReply& reply) {
  return reply.type == RedisReply::Type::String || (reply.type == RedisReply::Type::Integer && reply.integer > 0);
}

}  // namespace

LockGuard ServiceCore::acquire(std::string_view key, const LockOptions& options, bool throw_on_timeout) {
  refuse_after_fork();
  // A waiter may sleep for seconds: keep this alive even if the service object is dropped meanwhile.
  const std::shared_ptr<ServiceCore> self = shared_from_this();
  validate(key, options);
  const Millis wait = options.wait.value_or(config_.wait);
  const bool renewed = !options.lease.has_value();
  const Millis lease = options.lease.value_or(config_.watchdog_timeout);
  const Clock::time_point called = Clock::now();
  const Clock::time_point deadline = called + wait;
  const std::string thread_owner = owner_token(options.owner);
  const std::string held = held_key(thread_owner, key);
  if (std::shared_ptr<HeldLock> mine = find_live(held)) {
    if (std::optional<LockGuard> guard = reenter(mine, lease, renewed, called, deadline, throw_on_timeout)) {
      return std::move(*guard);
    }
  }
  return acquire_first(key, held, thread_owner, lease, renewed, called, deadline, throw_on_timeout);
}

LockGuard ServiceCore::acquire_first(std::string_view key, const std::string& held, const std::string& thread_owner,
                                     Millis lease, bool renewed, Clock::time_point called,
                                     Clock::time_point deadline, bool throw_on_timeout) {
  const LockNames names = names_for(key);
  const std::string id = acquisition_id(held, thread_owner);
  const std::array<std::string_view, 5> script_keys = names.script_keys();
  const std::string lease_arg = std::to_string(lease.count());
  // A waiter re-confirms its place in line at least this often.
  const Millis refresh = config_.turn_window / 3;

  // Over a Redlock, the place in line is this caller's first try, by its own clock, on every node alike.
  const std::string arrival_arg =
      scripts_.quorum() ? ' ' + std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                                                   std::chrono::system_clock::now().time_since_epoch())
                                                   .count())
                        : std::string();
  WaiterTable::Ticket ticket;
  long long last_nap_ms = 0;
  std::string unacknowledged;  // why the last grant did not count (lock.replica_acks), if it did not
  for (;;) {
    const Clock::time_point sent = Clock::now();
    const Millis wait_left = std::max(Millis(0), std::chrono::ceil<Millis>(deadline - sent));
    RedisReply reply;
    try {
      const std::string settings_arg = std::to_string(wait_left.count()) + ' ' + line_settings_ + arrival_arg;
      const std::array<std::string_view, 3> args{id, lease_arg, settings_arg};
      reply = scripts_.run_acknowledged(kAcquireScript, script_keys, args, &is_grant);
      throw_if_transient(key, reply, "acquire");
    } catch (const ConnectionError&) {
      // An outage shorter than the wait is waited out; a reply lost to it is
      // harmless, since the next try, with the same id, adopts what it left.
      const Clock::time_point now = Clock::now();
      if (now >= deadline) {
        remember_orphan(held, id, lease);
        throw;
      }
      const Millis nap = std::min(kOutageRetry, std::chrono::ceil<Millis>(deadline - now));
      if (ticket) {
        // The subscriber's reconnect notice ends it early.
        if (auto direct = ticket.wait(nap)) return grant_direct(key, names, id, held, *direct, lease, renewed, called);
      } else {
        std::this_thread::sleep_for(nap);
      }
      continue;
    }
    if (reply.is_error() && reply.str.starts_with(kNotAcknowledgedError)) {
      // Granted on the master, but a failover could lose it: give it back
      // (the next in line is told) and try again within the wait.
      unacknowledged = reply.str.substr(kNotAcknowledgedError.size() + 1);
      logger_->debug("{}: granted but {}; giving it back and trying again", lock_label(key), unacknowledged);
      undo_unacknowledged_grant(key, names, id);
      last_nap_ms = config_.replica_ack_timeout.count();
      const Clock::time_point now = Clock::now();
      if (now >= deadline) break;
      std::this_thread::sleep_for(std::min(std::chrono::ceil<Millis>(deadline - now), refresh));
      continue;
    }
    // Granted: the token (an integer > 0, or text). Not granted: -1 - nap.
    if (is_grant(reply)) {
      const std::optional<std::uint64_t> token = token_of(reply);
      if (!token) throw_reply_error(key, names, reply, "acquire");
      return grant(key, names.lock(), id, held, *token, lease, renewed, sent, called);
    }
    if (reply.type != RedisReply::Type::Integer) throw_reply_error(key, names, reply, "acquire");
    last_nap_ms = -1 - reply.integer;
    unacknowledged.clear();  // refused as busy since: that is why, if the wait ends now
    Clock::time_point now = Clock::now();
    if (now >= deadline) break;
    // Never sleep past the holder's lease (a crashed holder publishes nothing)
    // nor past a third of the turn window (the place in line must be renewed).
    const Millis nap = last_nap_ms >= 0 ? Millis(last_nap_ms + 1) : last_nap_ms == -1 ? kNoLeaseRetry : Millis(1);
    const Clock::time_point wake = std::min({now + std::min(nap, refresh), deadline});
    if (!ticket) {
      stats_.contended.fetch_add(1, std::memory_order_relaxed);
      // Unconfirmed, a waiter falls back to its timed tries, which must not stop for long.
      waiters_.enter(names.channel(), id, lease.count(), ticket, std::min(deadline, Clock::now() + refresh));
      // Listening now, it hears every release from here on; one between the
      // try above and now it looks for before it sleeps. While the lock is
      // held, its release is still to come: a plain EXISTS tells, at a
      // fraction of what another try would cost the server. Unless the look
      // would end past the time to renew its place in line (a slow link, a
      // slow subscription): then it tries at once, which renews it.
      if (Clock::now() + (now - sent) >= wake || !still_held(names)) continue;
      // Subscribing took time of its own (up to the wait's end, unconfirmed): the sleep still ends on time.
      now = Clock::now();
      if (now >= deadline) break;
    }
    if (auto direct = ticket.wait(std::max(Millis(0), std::chrono::ceil<Millis>(wake - now)))) {
      return grant_direct(key, names, id, held, *direct, lease, renewed, called);
    }
  }
  const bool tried_once = deadline == called;
  // A try without a wait never joined the line (its acquire said wait 0).
  if (!tried_once) leave_line(names, id);
  (tried_once ? stats_.busy : stats_.timeouts).fetch_add(1, std::memory_order_relaxed);
  if (!throw_on_timeout) return {};
  throw_not_had({lock_label(key), tried_once, std::chrono::duration_cast<Millis>(deadline - called),
                 "another owner holds it or waits ahead in line (lease or turn left " + std::to_string(last_nap_ms) +
                     " ms)",
                 unacknowledged});
}

void ServiceCore::undo_unacknowledged_grant(std::string_view key, const LockNames& names, const std::string& id) {
  const std::array<std::string_view, 2> args{id, line_settings_};
  try {
    const RedisReply reply = scripts_.run(kReleaseScript, names.script_keys(), args);
    if (reply.is_error()) {
      logger_->warn("{}: giving back a grant too few replicas acknowledged failed: {}", lock_label(key), reply.str);
    }
  } catch (const ConnectionError& e) {
    // Unreleased, it idles out its lease (nobody renews it); the next try, with the same id, adopts it.
    logger_->warn("{}: giving back a grant too few replicas acknowledged failed: {}", lock_label(key), e.what());
  }
}

bool ServiceCore::still_held(const LockNames& names) {
  try {
    const std::array<std::string_view, 2> exists{"EXISTS", names.lock()};
    return is_integer(redis_->command_parts(exists), 1);
  } catch (const ConnectionError&) {
    return false;  // the next try finds out, and waits out the outage as any try does
  }
}

void ServiceCore::leave_line(const LockNames& names, const std::string& id) {
  // Best effort: a waiter left in line costs the others one turn window at most.
  try {
    const std::string window_arg = std::to_string(config_.turn_window.count());
    const std::array<std::string_view, 2> args{id, window_arg};
    scripts_.run(kLeaveScript, names.script_keys(), args);
  } catch (const Error& e) {
    logger_->debug("could not leave the line of '{}': {}", printable(names.lock()), e.what());
  }
}

}  // namespace dlock::detail
