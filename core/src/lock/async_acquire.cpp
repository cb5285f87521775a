// An async acquisition (async_acquire.hpp): the steps of lock/acquisition.hpp
// driven by jobs on dlock's I/O threads, sleeping in line without a thread.
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

  void start() {
    core_->io_threads().post([self = shared_from_this()] { self->begin(); });
  }

  void cancel() override {
    std::lock_guard lock(mutex_);
    if (finished_ || cancelled_) return;
    cancelled_ = true;
    // Running (the start, a try): it sees the flag when it returns. Asleep: the sleep ends now.
    if (sleeping_) end_sleep_locked();
  }

 private:
  using Step = Acquisition::Step;

  void begin() {
    try {
      if (is_cancelled()) return finish(nullptr, {}, true);
      AcquireStart start = request_.kind == AsyncRequest::Kind::lock
                               ? core_->start_acquire(request_.key, request_.options, request_.throw_on_timeout)
                               : core_->start_acquire_shared(shared_request(), request_.options,
                                                             request_.throw_on_timeout);
      if (start.done) return finish(nullptr, std::move(*start.done), false);
      attempt_ = std::move(start.attempt);
      acquisition_.emplace(*core_, *attempt_, start.called, start.deadline);
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
        // A grant that raced the cancellation is given back (the guard's release), and the line left.
        if (step.kind == Step::Kind::granted) {
          LockGuard raced = acquisition_->take_guard();
        } else {
          acquisition_->abandon();
        }
        return finish(nullptr, {}, true);
      }
      switch (step.kind) {
        case Step::Kind::try_now:
          step = acquisition_->try_once();
          continue;
        case Step::Kind::granted:
          return finish(nullptr, acquisition_->take_guard(), false);
        case Step::Kind::not_had:
          return finish(nullptr, acquisition_->not_had(request_.throw_on_timeout), false);
        case Step::Kind::sleep:
          return sleep(step.until);
      }
    }
  }

  // Exactly one after_sleep() follows each sleep: in line, the ticket's wake
  // (a notice, a hand-off, or expire() by the timer or cancel()); else the
  // timer, or cancel() when it took the timer back.
  void sleep(Clock::time_point until) {
    const std::shared_ptr<AsyncAcquire> self = shared_from_this();
    WaiterTable::Ticket& ticket = acquisition_->ticket_ref();
    std::lock_guard lock(mutex_);
    sleeping_ = true;
    const std::uint64_t sleep = ++sleeps_;
    if (ticket) {
      ticket.sleep_async([self] { self->core_->io_threads().post([self] { self->after_sleep(); }); });
      timer_ = core_->io_threads().at(until, [self, sleep] { self->on_timer(sleep); });
    } else {
      timer_ = core_->io_threads().at(until, [self] { self->after_sleep(); });
    }
    // cancel() came between the step and the sleep: it found nothing asleep to end.
    if (cancelled_) end_sleep_locked();
  }

  // The sleep's end, unless it already ended. Called with mutex_ held.
  void end_sleep_locked() {
    if (WaiterTable::Ticket& ticket = acquisition_->ticket_ref()) {
      ticket.expire();  // an offer in flight is settled first, then the wake comes
    } else if (timer_ && core_->io_threads().cancel(*timer_)) {
      timer_.reset();
      core_->io_threads().post([self = shared_from_this()] { self->after_sleep(); });
    }
  }

  void on_timer(std::uint64_t sleep) {
    std::lock_guard lock(mutex_);
    if (sleeping_ && sleeps_ == sleep) acquisition_->ticket_ref().expire();
  }

  void after_sleep() {
    std::optional<std::uint64_t> timer;
    {
      std::lock_guard lock(mutex_);
      sleeping_ = false;
      timer = std::exchange(timer_, std::nullopt);
    }
    if (timer) core_->io_threads().cancel(*timer);
    try {
      WaiterTable::Ticket& ticket = acquisition_->ticket_ref();
      advance(acquisition_->woke(ticket ? ticket.woken() : std::nullopt));
    } catch (...) {
      finish(std::current_exception(), {}, false);
    }
  }

  bool is_cancelled() {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }

  void finish(std::exception_ptr error, LockGuard guard, bool cancelled) {
    {
      std::lock_guard lock(mutex_);
      if (finished_) return;
      finished_ = true;
    }
    // The ticket (the place in line) goes before the caller hears: a waiter left in it would stand in the way.
    acquisition_.reset();
    attempt_.reset();
    AsyncDone done = std::move(done_);
    done(error, std::move(guard), cancelled);
  }

  const std::shared_ptr<ServiceCore> core_;
  const AsyncRequest request_;
  AsyncDone done_;
  std::unique_ptr<AcquireTry> attempt_;
  std::optional<Acquisition> acquisition_;

  std::mutex mutex_;
  bool cancelled_ = false;                 // guarded by mutex_
  bool finished_ = false;                  // guarded by mutex_
  bool sleeping_ = false;                  // guarded by mutex_: acquisition_ lives while it is set
  std::uint64_t sleeps_ = 0;               // guarded by mutex_: numbers the sleeps, for their timers
  std::optional<std::uint64_t> timer_;     // guarded by mutex_
};

std::shared_ptr<AsyncOperation> ServiceCore::acquire_async(AsyncRequest request, AsyncDone done) {
  auto operation = std::make_shared<AsyncAcquire>(shared_from_this(), std::move(request), std::move(done));
  operation->start();
  return operation;
}

}  // namespace dlock::detail
