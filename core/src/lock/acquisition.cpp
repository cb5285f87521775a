// The steps of one acquire call (acquisition.hpp): a try and what its reply
// means, joining the line, sleeping, the timeout's report; and the blocking driver.
#include "lock/acquisition.hpp"

#include <algorithm>
#include <thread>

#include "dlock/errors.hpp"

namespace dlock::detail {
namespace {

// A lock whose hash has no expiry (PERSISTed by hand) gives no PTTL to sleep
// on: retry on this period instead.
constexpr Millis kNoLeaseRetry{100};

Millis until_now(Clock::time_point when) {
  return std::max(Millis(0), std::chrono::ceil<Millis>(when - Clock::now()));
}

}  // namespace

AcquireStart::AcquireStart(Clock::time_point called_, Clock::time_point deadline_)
    : called(called_), deadline(deadline_) {}
AcquireStart::AcquireStart(AcquireStart&&) noexcept = default;
AcquireStart& AcquireStart::operator=(AcquireStart&&) noexcept = default;
AcquireStart::~AcquireStart() = default;

Acquisition::Acquisition(ServiceCore& core, AcquireTry& attempt, Clock::time_point called,
                         Clock::time_point deadline)
    : core_(core), attempt_(attempt), called_(called), deadline_(deadline), refresh_(core.config_.turn_window / 3) {}

Acquisition::Step Acquisition::try_once() {
  const Clock::time_point sent = Clock::now();
  const Millis wait_left = std::max(Millis(0), std::chrono::ceil<Millis>(deadline_ - sent));
  AcquireTry::Reading reading;
  try {
    reading = attempt_.run(wait_left);
  } catch (const AuthenticationError&) {
    // A refused login is not an outage: retrying it for the whole wait (10 s by
    // default) only delays the message. Its place in line is left later, if any.
    attempt_.remember_orphan();
    throw;
  } catch (const ConnectionError&) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline_) {
      attempt_.remember_orphan();
      throw;
    }
    // In line, the subscriber's reconnect notice ends the nap early.
    return sleep_until(now + std::min(kOutageRetry, std::chrono::ceil<Millis>(deadline_ - now)));
  } catch (const Error&) {
    // Refused: a try that could wait may have put this caller in line.
    if (ticket_ || wait_left.count() > 0) attempt_.leave_line();
    throw;
  }
  using Kind = AcquireTry::Reading::Kind;
  if (reading.kind == Kind::granted) {
    waiting_.stop();
    guard_ = attempt_.grant(reading, sent, called_);
    return {Step::Kind::granted};
  }
  if (reading.kind == Kind::not_acknowledged) {
    // Granted on the master, but a failover could lose it: given back (the
    // next in line is told), and tried again within the wait.
    unacknowledged_ = reading.why;
    attempt_.give_back();
    last_nap_ms_ = core_.config_.replica_ack_timeout.count();
    const Clock::time_point now = Clock::now();
    if (now >= deadline_) return {Step::Kind::not_had};
    return sleep_until(std::min(deadline_, now + refresh_));
  }
  last_nap_ms_ = reading.nap_ms;
  unacknowledged_.clear();  // refused as busy since: that is why, if the wait ends now
  Clock::time_point now = Clock::now();
  if (now >= deadline_) return {Step::Kind::not_had};
  // Never sleep past the holder's lease (a crashed holder publishes nothing)
  // nor past a third of the turn window (the place in line must be renewed).
  // A waiter the line keeper renews sleeps to the holder's lease or its wait.
  const bool kept = !attempt_.kept_key().empty();
  const Millis nap = last_nap_ms_ >= 0 ? Millis(last_nap_ms_ + 1) : last_nap_ms_ == -1 ? kNoLeaseRetry : Millis(1);
  const Clock::time_point wake = std::min(kept ? now + nap : now + std::min(nap, refresh_), deadline_);
  if (!ticket_) {
    core_.stats_.contended.fetch_add(1, std::memory_order_relaxed);
    waiting_.start(core_.waiting_calls_, attempt_.key());
    if (core_.key_prefix_series_.enabled()) core_.key_prefix_series_.series_of(attempt_.key());
    // Unconfirmed, a waiter falls back to its timed tries, which must not stop for long.
    core_.waiters_.enter(attempt_.channel(), attempt_.id(), attempt_.lease().count(), ticket_,
                         std::min(deadline_, Clock::now() + refresh_), attempt_.kept_key());
    if (kept) core_.keep_lines_soon();
    // Listening now, it hears every release from here on; one between the
    // try above and now it looks for before it sleeps. Unless the look would
    // end past the time to renew its place in line (a slow link, a slow
    // subscription): then it tries at once, which renews it. A kept waiter
    // too: the keeper's first round comes a third of a window after the
    // subscription, too late where subscribing took a slow round trip.
    const Clock::time_point renew_by = kept ? std::min(now + refresh_, deadline_) : wake;
    if (Clock::now() + (now - sent) >= renew_by || !attempt_.release_still_to_come()) return {Step::Kind::try_now};
    // Subscribing took time of its own (up to the wait's end, unconfirmed): the sleep still ends on time.
    if (Clock::now() >= deadline_) return {Step::Kind::not_had};
  }
  return sleep_until(wake);
}

Acquisition::Step Acquisition::woke(std::optional<WaiterTable::DirectGrant> direct) {
  if (!direct) return {Step::Kind::try_now};
  waiting_.stop();
  guard_ = attempt_.grant_direct(*direct, called_);
  return {Step::Kind::granted};
}

LockGuard Acquisition::not_had(bool throw_on_timeout) {
  abandon();
  return verdict(throw_on_timeout);
}

LockGuard Acquisition::verdict(bool throw_on_timeout) {
  waiting_.stop();
  const bool tried_once = deadline_ == called_;
  (tried_once ? core_.stats_.busy : core_.stats_.timeouts).fetch_add(1, std::memory_order_relaxed);
  if (!throw_on_timeout) return {};
  ServiceCore::NotHad why = attempt_.not_had(last_nap_ms_);
  why.tried_once = tried_once;
  why.waited = std::chrono::duration_cast<Millis>(deadline_ - called_);
  why.unacknowledged = unacknowledged_;
  core_.throw_not_had(why);
}

void Acquisition::abandon() {
  waiting_.stop();
  // A try without a wait never joined the line (its script was told wait 0).
  if (ticket_ || deadline_ > called_) attempt_.leave_line();
}

std::optional<WaiterTable::DirectGrant> Acquisition::sleep_here(Clock::time_point until) {
  if (ticket_) return ticket_.wait(until_now(until));
  std::this_thread::sleep_for(until_now(until));
  return std::nullopt;
}

LockGuard run_blocking(Acquisition& acquisition, bool throw_on_timeout) {
  Acquisition::Step step = acquisition.try_once();
  for (;;) {
    switch (step.kind) {
      case Acquisition::Step::Kind::try_now:
        step = acquisition.try_once();
        break;
      case Acquisition::Step::Kind::sleep:
        step = acquisition.woke(acquisition.sleep_here(step.until));
        break;
      case Acquisition::Step::Kind::granted:
        return acquisition.take_guard();
      case Acquisition::Step::Kind::not_had:
        return acquisition.not_had(throw_on_timeout);
    }
  }
}

}  // namespace dlock::detail
