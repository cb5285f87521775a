// An async acquisition (async_acquire.hpp): the steps of lock/acquisition.hpp
// driven by jobs on dlock's I/O threads, sleeping in line without a thread.
//
// Why the caller may hear before the line is left: a verdict that needs no
// round trip (the wait ran out, or a cancellation, while asleep or queued)
// is delivered at once from the timer thread or the cancelling thread, even
// while every I/O thread waits on a frozen server; leaving the line and
// giving back a hand-off that raced the verdict follow on an I/O thread
// ("settling"). Until settled, the operation keeps its `done` (and through
// it the caller's work guard: an io_context's run() does not return first).
#include "dlock/detail/async_acquire.hpp"

#include <mutex>

#include "dlock/detail/io_threads.hpp"
#include "dlock/detail/service_core.hpp"
#include "lock/acquisition.hpp"

namespace dlock::detail {

class AsyncAcquire final : public AsyncOperation, public std::enable_shared_from_this<AsyncAcquire> {
 public:
  AsyncAcquire(std::shared_ptr<ServiceCore> core, AsyncRequest request, AsyncDone done)
      : core_(std::move(core)), request_(std::move(request)), done_(std::move(done)) {}

  // One key's acquisitions begin one at a time, in call order: each joins
  // the line before the next tries, so the service's waiters stand in Redis'
  // line, and in its waiter table (whose oldest a release hands the lock
  // to), in the order they were called.
  void start() {
    core_->io_threads().post_in_order(request_.key, [self = shared_from_this()] { self->begin(); });
  }

  void cancel() override {
    std::unique_lock lock(mutex_);
    if (finished_ || cancelled_) return;
    cancelled_ = true;
    if (state_ == State::queued) {
      // Not begun: nothing to leave; the caller hears now, and begin() only lets go.
      finished_ = true;
      AsyncDone done = done_;
      lock.unlock();
      return done(nullptr, {}, true);
    }
    // A round trip in flight (the start, a try): it sees the flag when it returns. Else: completed now.
    if (state_ == State::asleep || state_ == State::woken) finish_idle(lock, nullptr, true);
  }

 private:
  using Step = Acquisition::Step;
  // queued: begin() has not run; running: a job on an I/O thread uses
  // acquisition_; asleep: a timer or the ticket will wake it; woken:
  // after_sleep() is posted, not yet running.
  enum class State { queued, running, asleep, woken };

  void begin() {
    {
      std::lock_guard lock(mutex_);
      state_ = State::running;
    }
    try {
      if (is_cancelled()) {
        finish(nullptr, {}, true);
        return settled();  // cancelled while queued: told already
      }
      AcquireStart start = request_.kind == AsyncRequest::Kind::lock
                               ? core_->start_acquire(request_.key, request_.options, request_.throw_on_timeout)
                               : core_->start_acquire_shared(shared_request(), request_.options,
                                                             request_.throw_on_timeout);
      if (start.done) return finish(nullptr, std::move(*start.done), false);
      attempt_ = std::move(start.attempt);
      acquisition_.emplace(*core_, *attempt_, start.called, start.deadline);
      if (start.deadline > start.called) {
        // Kept even while the I/O threads are busy: the verdict needs no round trip.
        std::lock_guard lock(mutex_);
        deadline_timer_ = core_->io_threads().at(start.deadline, [self = shared_from_this()] { self->on_deadline(); });
      }
      advance(acquisition_->try_once());
    } catch (...) {
      finish(std::current_exception(), {}, false);
    }
  }

  SharedRequest shared_request() const {
    const SharedKind kind = request_.kind == AsyncRequest::Kind::read    ? SharedKind::read
                            : request_.kind == AsyncRequest::Kind::write ? SharedKind::write
                                                                         : SharedKind::permits;
    return {kind, request_.key, request_.permits, request_.count_if_new};
  }

  // Runs steps until one needs a sleep or the acquisition is done. On an I/O thread; throws what a try threw.
  void advance(Step step) {
    for (;;) {
      if (is_cancelled()) {
        // A grant that raced the cancellation is given back (the guard's release sent) before the caller hears.
        if (step.kind == Step::Kind::granted) {
          {
            LockGuard raced = acquisition_->take_guard();
          }  // its release sent here, before the caller hears
          return finish(nullptr, {}, true);
        }
        return finish(nullptr, {}, true, true);
      }
      switch (step.kind) {
        case Step::Kind::try_now:
          step = acquisition_->try_once();
          continue;
        case Step::Kind::granted:
          return finish(nullptr, acquisition_->take_guard(), false);
        case Step::Kind::not_had:
          return finish_with_verdict();
        case Step::Kind::sleep:
          return sleep(step.until);
      }
    }
  }

  void finish_with_verdict() {
    std::exception_ptr error;
    LockGuard empty;
    try {
      empty = acquisition_->verdict(request_.throw_on_timeout);
    } catch (...) {
      error = std::current_exception();
    }
    finish(std::move(error), std::move(empty), false, true);
  }

  // Exactly one after_sleep() follows each sleep: in line, the ticket's wake
  // (a notice, a hand-off, or expire() by the timer, the deadline or
  // cancel()); else the timer, or finish_idle() when it took the timer back.
  void sleep(Clock::time_point until) {
    const std::shared_ptr<AsyncAcquire> self = shared_from_this();
    WaiterTable::Ticket& ticket = acquisition_->ticket_ref();
    std::unique_lock lock(mutex_);
    state_ = State::asleep;
    const std::uint64_t sleep = ++sleeps_;
    if (ticket) ticket.sleep_async([self] { self->wake(); });
    timer_ = core_->io_threads().at(until, [self, sleep] { self->on_timer(sleep); });
    // cancel() or the deadline came while this job ran: they found nothing asleep to end.
    if (cancelled_) {
      finish_idle(lock, nullptr, true);
    } else if (deadline_passed_) {
      finish_idle(lock, verdict_locked(), false);
    }
  }

  // The ticket's wake: on whichever thread delivered it, maybe inside
  // expire() or sleep_async() with mutex_ held, so it takes no lock; but a
  // hand-off's grant, woken on the releasing I/O thread with nothing held,
  // is collected there (no round trip, and one thread switch fewer per
  // hand-off).
  void wake() {
    if (core_->io_threads().on_io_thread() && WaiterTable::Ticket::take_grant_wake()) return after_sleep();
    core_->io_threads().post([self = shared_from_this()] { self->after_sleep(); });
  }

  // On the timer thread: quick, no round trip.
  void on_timer(std::uint64_t sleep) {
    std::unique_lock lock(mutex_);
    if (state_ != State::asleep || sleeps_ != sleep) return;
    timer_.reset();
    WaiterTable::Ticket& ticket = acquisition_->ticket_ref();
    if (!ticket) {
      // Out of line, this timer is the sleep's only end: after_sleep() takes the next step, or settles a
      // verdict (given below, or by a finish_idle() that could not take this timer back).
      state_ = State::woken;
      core_->io_threads().post([self = shared_from_this()] { self->after_sleep(); });
    }
    if (!finished_ && Clock::now() >= acquisition_->deadline()) return finish_idle(lock, verdict_locked(), false);
    if (ticket) ticket.expire();  // an offer in flight is settled first, then the wake comes (none if it came already)
  }

  // On the timer thread, when the wait runs out.
  void on_deadline() {
    std::unique_lock lock(mutex_);
    deadline_timer_.reset();
    if (finished_) return;
    deadline_passed_ = true;
    // Running: the job's next step sees the deadline. Idle: the caller hears now.
    if (state_ == State::asleep || state_ == State::woken) finish_idle(lock, verdict_locked(), false);
  }

  // The timeout's verdict, without a round trip. Called with mutex_ held, while idle.
  std::exception_ptr verdict_locked() {
    try {
      (void)acquisition_->verdict(true);
    } catch (...) {
      return request_.throw_on_timeout ? std::current_exception() : nullptr;
    }
    return nullptr;
  }

  // Completes an idle acquisition (the caller hears, with no guard) and has
  // after_sleep() settle it. The caller hears now, unless a hand-off may
  // have reached it (granted, or an offer in flight): then after_sleep()
  // gives that grant back first, so a caller never hears "cancelled" or
  // "timed out" while Redis has it as the holder. Called with mutex_ held; releases it.
  void finish_idle(std::unique_lock<std::mutex>& lock, std::exception_ptr error, bool cancelled) {
    finished_ = true;
    settling_ = true;
    bool tell_now = true;
    if (WaiterTable::Ticket& ticket = acquisition_->ticket_ref()) {
      tell_now = ticket.expire();  // asleep: its wake posts after_sleep() (once an offer in flight is settled)
    } else if (state_ == State::asleep && timer_ && core_->io_threads().cancel(*timer_)) {
      timer_.reset();
      state_ = State::woken;
      core_->io_threads().post([self = shared_from_this()] { self->after_sleep(); });
    }
    if (!tell_now) {
      untold_ = Untold{std::move(error), cancelled};
      return lock.unlock();
    }
    AsyncDone done = done_;  // a copy: done_ stays until settled
    lock.unlock();
    cancel_deadline();
    done(std::move(error), {}, cancelled);
  }

  void after_sleep() {
    bool settle = false;
    std::optional<std::uint64_t> timer;
    {
      std::lock_guard lock(mutex_);
      state_ = State::running;
      settle = settling_;
      timer = std::exchange(timer_, std::nullopt);
    }
    if (timer) core_->io_threads().cancel(*timer);
    if (settle) return settle_after_verdict();
    try {
      WaiterTable::Ticket& ticket = acquisition_->ticket_ref();
      advance(acquisition_->woke(ticket ? ticket.woken() : std::nullopt));
    } catch (...) {
      finish(std::current_exception(), {}, false);
    }
  }

  // After finish_idle(): a hand-off that raced the verdict is given back, the
  // caller told if it was not yet, the line left. On an I/O thread.
  void settle_after_verdict() {
    std::optional<Untold> untold;
    {
      std::lock_guard lock(mutex_);
      untold = std::exchange(untold_, std::nullopt);
    }
    bool in_line = true;
    try {
      WaiterTable::Ticket& ticket = acquisition_->ticket_ref();
      if (std::optional<WaiterTable::DirectGrant> direct = ticket ? ticket.woken() : std::nullopt) {
        (void)acquisition_->woke(direct);
        LockGuard raced = acquisition_->take_guard();  // its release sent here, before the caller hears
        in_line = false;
      }
    } catch (...) {
      // The grant's release failed: it was logged, and the lock expires by its lease.
    }
    if (untold) {
      cancel_deadline();
      AsyncDone done;
      {
        std::lock_guard lock(mutex_);
        done = done_;
      }
      done(std::move(untold->error), {}, untold->cancelled);
    }
    try {
      if (in_line) acquisition_->abandon();
    } catch (...) {
      // Best effort: a waiter left in line costs the others one turn window at most.
    }
    settled();
  }

  bool is_cancelled() {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }

  // From a job on an I/O thread (acquisition_ is this job's): the caller
  // hears, then the line is left if `leave_line`.
  void finish(std::exception_ptr error, LockGuard guard, bool cancelled, bool leave_line = false) {
    {
      std::lock_guard lock(mutex_);
      if (finished_) return;
      finished_ = true;
    }
    cancel_deadline();
    AsyncDone done;
    {
      std::lock_guard lock(mutex_);
      done = done_;
    }
    done(std::move(error), std::move(guard), cancelled);
    if (leave_line && acquisition_) {
      try {
        acquisition_->abandon();
      } catch (...) {
      }
    }
    settled();
  }

  void cancel_deadline() {
    std::optional<std::uint64_t> deadline;
    {
      std::lock_guard lock(mutex_);
      deadline = std::exchange(deadline_timer_, std::nullopt);
    }
    if (deadline) core_->io_threads().cancel(*deadline);
  }

  // The ticket (the place in line) and the caller's completion go last.
  void settled() {
    acquisition_.reset();
    attempt_.reset();
    AsyncDone done;
    std::lock_guard lock(mutex_);
    done = std::move(done_);
  }

  const std::shared_ptr<ServiceCore> core_;
  const AsyncRequest request_;
  std::unique_ptr<AcquireTry> attempt_;
  std::optional<Acquisition> acquisition_;

  std::mutex mutex_;
  AsyncDone done_;                               // guarded by mutex_ once started
  State state_ = State::queued;                  // guarded by mutex_
  bool cancelled_ = false;                       // guarded by mutex_
  bool finished_ = false;                        // guarded by mutex_: the caller heard
  bool settling_ = false;                        // guarded by mutex_: heard while idle; after_sleep() settles
  bool deadline_passed_ = false;                 // guarded by mutex_
  std::uint64_t sleeps_ = 0;                     // guarded by mutex_: numbers the sleeps, for their timers
  std::optional<std::uint64_t> timer_;           // guarded by mutex_
  std::optional<std::uint64_t> deadline_timer_;  // guarded by mutex_
  struct Untold {
    std::exception_ptr error;
    bool cancelled = false;
  };
  std::optional<Untold> untold_;                 // guarded by mutex_: a verdict settling tells
};

std::shared_ptr<AsyncOperation> ServiceCore::acquire_async(AsyncRequest request, AsyncDone done) {
  auto operation = std::make_shared<AsyncAcquire>(shared_from_this(), std::move(request), std::move(done));
  operation->start();
  return operation;
}

}  // namespace dlock::detail
