#pragma once
// One acquire call as steps, written once for every primitive (the lock; a
// read-write lock's holds and a semaphore's permits: each an AcquireTry)
// and for any driver: the blocking calls run the steps in a loop on the
// caller's thread (run_blocking); an asynchronous driver runs the same
// steps with its round trips and sleeps elsewhere. The rules, here once:
// - an outage shorter than the wait is waited out; a reply lost to it is
//   harmless, since the next try carries the same id and adopts the grant;
// - a grant too few replicas acknowledged (lock.replica_acks) is given
//   back, and tried again within the wait;
// - a busy answer joins the line, listening for the release notice, and
//   sleeps no longer than the holder's lease, a third of the turn window
//   (its place in line must be renewed) or the wait;
// - a wait that runs out leaves the line and says why, in the words every
//   primitive shares (ServiceCore::throw_not_had).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "dlock/detail/service_core.hpp"

namespace dlock::detail {

// What one primitive's try is, and what its reply says.
class AcquireTry {
 public:
  virtual ~AcquireTry() = default;

  struct Reading {
    enum class Kind { granted, busy, not_acknowledged };
    Kind kind = Kind::busy;
    std::uint64_t token = 0;  // granted: the fencing token
    long long nap_ms = 0;     // busy: the lease or turn the script says is left; -1: the holder has no lease
    std::string why;          // not_acknowledged: how many replicas acknowledged
  };

  // One round trip. Throws ConnectionError for an outage or a passing state
  // (BUSY, LOADING: nothing ran), and the primitive's own error for a refusal.
  virtual Reading run(Millis wait_left) = 0;
  virtual LockGuard grant(const Reading& granted, Clock::time_point sent, Clock::time_point called) = 0;
  // The lock, handed over inside another thread's release (only a lock's
  // waiters are offered one; the others never get here).
  virtual LockGuard grant_direct(const WaiterTable::DirectGrant& direct, Clock::time_point called) = 0;
  // Gives back a grant too few replicas acknowledged.
  virtual void give_back() = 0;
  // Leaves the line (best effort: a waiter left in it costs the others one turn window at most).
  virtual void leave_line() = 0;
  // Asked once, just after joining the line: whether a release is still to
  // come (a notice will wake the waiter) or it should try again at once (a
  // release may have come between its try and its subscription).
  virtual bool release_still_to_come() = 0;
  // The last try's outcome is unknown (its reply was lost): the caller's next
  // acquisition of the same hold adopts what it left rather than idling out a lease.
  virtual void remember_orphan() = 0;
  // What a wait that ran out says: the primitive, who holds it, the try form.
  virtual ServiceCore::NotHad not_had(long long last_nap_ms) const = 0;

  // The user key of a line the service's line keeper renews for this
  // waiter (waiting/line_keeper.cpp), or empty: then the waiter renews its
  // own place, waking at least every third of the turn window.
  virtual std::string_view kept_key() const { return {}; }

  virtual std::string_view key() const = 0;        // the user's key, for the waiting gauge
  virtual const std::string& channel() const = 0;  // where its releases are told
  virtual const std::string& id() const = 0;       // the acquisition id
  virtual Millis lease() const = 0;
};

class Acquisition {
 public:
  struct Step {
    enum class Kind { try_now, sleep, granted, not_had };
    Kind kind = Kind::try_now;
    Clock::time_point until{};  // sleep: until then, unless a notice or a direct grant comes first
  };

  Acquisition(ServiceCore& core, AcquireTry& attempt, Clock::time_point called, Clock::time_point deadline);
  Acquisition(const Acquisition&) = delete;
  Acquisition& operator=(const Acquisition&) = delete;

  // One try (its round trip on the calling thread) and what comes next.
  // Throws what the try threw when it cannot be waited out.
  Step try_once();
  // After a sleep, with the lock if it was handed over meanwhile.
  Step woke(std::optional<WaiterTable::DirectGrant> direct);
  // After Step::granted.
  LockGuard take_guard() { return std::move(guard_); }
  // Leaves the line, if it may have joined it (best effort; a round trip).
  void abandon();
  // The place in line (empty until the first busy answer): the async driver sleeps on it.
  WaiterTable::Ticket& ticket_ref() { return ticket_; }
  // After Step::not_had: leaves the line and counts it; an empty guard, or LockTimeoutError.
  LockGuard not_had(bool throw_on_timeout);
  // not_had() without leaving the line (no round trip): the async driver
  // tells the caller first, and leaves the line after (abandon()).
  LockGuard verdict(bool throw_on_timeout);
  // When the wait runs out.
  Clock::time_point deadline() const { return deadline_; }
  Clock::time_point called() const { return called_; }
  // The blocking sleep of Step::sleep: on the ticket while in line (a notice
  // or a direct grant ends it), else a plain sleep.
  std::optional<WaiterTable::DirectGrant> sleep_here(Clock::time_point until);

 private:
  Step sleep_until(Clock::time_point until) { return {Step::Kind::sleep, until}; }

  ServiceCore& core_;
  AcquireTry& attempt_;
  const Clock::time_point called_;
  const Clock::time_point deadline_;
  const Millis refresh_;  // a waiter not kept by the line keeper re-confirms its place at least this often
  WaiterTable::Ticket ticket_;
  long long last_nap_ms_ = 0;
  std::string unacknowledged_;  // why the last grant did not count (lock.replica_acks), if it did not
  LockGuard guard_;
  WaitingCalls::Mark waiting_;  // counted from the first busy answer until granted or given up
};

// Runs an acquisition's steps on the calling thread.
LockGuard run_blocking(Acquisition& acquisition, bool throw_on_timeout);

}  // namespace dlock::detail
