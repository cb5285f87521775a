// async_lock_all: lock_all's steps (set_acquisition.hpp) driven on dlock's I/O
// threads, each key taken by an async acquisition (async_acquire.cpp), the
// pause before a set starts again a timer. One key's acquisition is in
// flight at a time, and every step (a key's outcome, the pause's end, a
// cancellation's release of the keys taken) is a job posted to an I/O
// thread: the steps are never run by two threads at once, and never on the
// timer thread or a cancelling caller's thread (releasing keys is a round trip).
#include <mutex>
#include <optional>

#include "dlock/detail/async_acquire.hpp"
#include "dlock/detail/io_threads.hpp"
#include "dlock/detail/service_core.hpp"
#include "dlock/lock_service.hpp"
#include "primitives/set_acquisition.hpp"

namespace dlock {
namespace detail {
namespace {

class AsyncAcquireAll final : public AsyncOperation, public std::enable_shared_from_this<AsyncAcquireAll> {
 public:
  AsyncAcquireAll(std::shared_ptr<ServiceCore> core, std::vector<std::string> keys, LockOptions options,
                  bool throw_on_timeout, AsyncSetDone done)
      : core_(std::move(core)),
        keys_(std::move(keys)),
        options_(std::move(options)),
        throw_on_timeout_(throw_on_timeout),
        done_(std::move(done)) {}

  void start() {
    core_->io_threads().post([self = shared_from_this()] { self->begin(); });
  }

  void cancel() override {
    std::shared_ptr<AsyncOperation> key_in_flight;
    {
      std::lock_guard lock(mutex_);
      if (finished_ || cancelled_) return;
      cancelled_ = true;
      key_in_flight = current_;
      // Pausing before the set starts again: the pause ends now.
      if (timer_ && core_->io_threads().cancel(*timer_)) {
        timer_.reset();
        core_->io_threads().post([self = shared_from_this()] { self->finish_cancelled(); });
      }
    }
    // Waiting for a key: that acquisition completes cancelled (a grant that raced it given back), and
    // its completion, posted, ends the set. Outside mutex_: the key may complete on this very thread.
    if (key_in_flight) key_in_flight->cancel();
  }

 private:
  using Step = SetAcquisition::Step;

  void begin() {
    try {
      set_.emplace(*core_, std::move(keys_), options_, throw_on_timeout_);
      advance();
    } catch (...) {
      finish(std::current_exception(), {}, false);
    }
  }

  // Takes the next key, pauses, or ends. Throws what the set's steps throw.
  void advance() {
    if (is_cancelled()) return finish_cancelled();
    const Step step = set_->next();
    switch (step.kind) {
      case Step::Kind::take: {
        const std::shared_ptr<AsyncAcquireAll> self = shared_from_this();
        AsyncRequest request{AsyncRequest::Kind::lock, *step.key, step.options, true};
        std::shared_ptr<AsyncOperation> key;
        bool cancelled = false;
        {
          // Started under mutex_ (acquire_async only posts its start): its outcome, a job that takes
          // mutex_ to clear current_, cannot come before current_ names it.
          std::lock_guard lock(mutex_);
          key = core_->acquire_async(std::move(request), [self](std::exception_ptr error, LockGuard guard,
                                                                bool cancelled) {
            // A key's outcome may be told on the timer thread or a cancelling thread: the set's step runs on an I/O thread.
            auto held = std::make_shared<LockGuard>(std::move(guard));
            self->core_->io_threads().post([self, error = std::move(error), held, cancelled]() mutable {
              self->on_key(std::move(error), std::move(*held), cancelled);
            });
          });
          current_ = key;
          // cancel() came while this key was being asked for: it found nothing in flight to cancel.
          cancelled = cancelled_;
        }
        if (cancelled) key->cancel();
        return;
      }
      case Step::Kind::pause: {
        std::lock_guard lock(mutex_);
        // The timer thread only posts: the next key's start is a job for an I/O thread.
        timer_ = core_->io_threads().at(Clock::now() + step.pause, [self = shared_from_this()] {
          self->core_->io_threads().post([self] { self->after_pause(); });
        });
        return;
      }
      case Step::Kind::done:
        return finish(nullptr, set_->result(), false);
    }
  }

  void on_key(std::exception_ptr error, LockGuard guard, bool cancelled) {
    {
      std::lock_guard lock(mutex_);
      current_.reset();
    }
    try {
      if (cancelled) return finish_cancelled();
      if (error) return finish(nullptr, set_->failed(std::move(error)), false);
      set_->took(std::move(guard));
      advance();
    } catch (...) {
      finish(std::current_exception(), {}, false);
    }
  }

  void after_pause() {
    {
      std::lock_guard lock(mutex_);
      timer_.reset();
    }
    try {
      advance();
    } catch (...) {
      finish(std::current_exception(), {}, false);
    }
  }

  // Nothing of the set stays held.
  void finish_cancelled() {
    if (set_) set_->release_taken();
    finish(nullptr, {}, true);
  }

  bool is_cancelled() {
    std::lock_guard lock(mutex_);
    return cancelled_;
  }

  void finish(std::exception_ptr error, MultiLockGuard guard, bool cancelled) {
    {
      std::lock_guard lock(mutex_);
      if (finished_) return;
      finished_ = true;
    }
    set_.reset();
    AsyncSetDone done = std::move(done_);
    done(std::move(error), std::move(guard), cancelled);
  }

  const std::shared_ptr<ServiceCore> core_;
  std::vector<std::string> keys_;  // moved into set_ when it starts
  const LockOptions options_;
  const bool throw_on_timeout_;
  AsyncSetDone done_;
  std::optional<SetAcquisition> set_;  // only the chain of jobs (start, a key's completion, a pause) touches it

  std::mutex mutex_;
  bool cancelled_ = false;                       // guarded by mutex_
  bool finished_ = false;                        // guarded by mutex_
  std::shared_ptr<AsyncOperation> current_;      // guarded by mutex_: the key in flight
  std::optional<std::uint64_t> timer_;           // guarded by mutex_: the pause
};

}  // namespace
}  // namespace detail

std::shared_ptr<detail::AsyncOperation> RedisLockService::start_async_all(std::vector<std::string> keys,
                                                                          LockOptions options, bool throw_on_timeout,
                                                                          detail::AsyncSetDone done) {
  if (!throw_on_timeout && !options.wait) options.wait = Millis(0);
  // One owner for the whole set (each key re-enters the set's own holds only), never the starting thread.
  if (!options.owner) options.owner = Owner::create();
  auto operation = std::make_shared<detail::AsyncAcquireAll>(core_, std::move(keys), std::move(options),
                                                             throw_on_timeout, std::move(done));
  operation->start();
  return operation;
}

}  // namespace dlock
