#pragma once
// The async API for standalone Asio (Debian's libasio-dev, 1.22) and C++20
// coroutines. Not included by <dlock/dlock.hpp>: code without Asio is not
// touched by it. Each call is an Asio asynchronous operation:
//
//   auto guard = co_await dlock::async_lock(*service, "stock:42", {.wait = 5s}, asio::use_awaitable);
//
// - Completion signature void(std::exception_ptr, LockGuard): with
//   use_awaitable the blocking call's own exceptions are thrown
//   (LockTimeoutError, ConnectionError, ...), with the same messages.
//   asio::deferred, asio::use_future and plain callbacks work too.
// - The handler runs on its associated executor (asio::bind_executor; a
//   coroutine's own), else on asio::system_executor's pool: never on a dlock
//   thread, never inline inside the call.
// - Owners: without LockOptions::owner each acquisition is its own owner (no
//   re-entry by thread: coroutines share threads); pass a task's Owner, or a
//   guard's owner(), to re-enter.
// - Waiting holds no thread: the round trips run on dlock's own I/O threads,
//   a waiter sleeps in the lock's line until a release notice, an
//   in-process hand-off or its timer wakes it.
// - Per-operation cancellation (cancellation slots, e.g.
//   `co_await (dlock::async_lock(...) || timer.async_wait(...))`): a waiting
//   acquisition leaves the line at once and completes with
//   asio::system_error(asio::error::operation_aborted), holding nothing (a
//   grant that raced the cancellation is released first).

#include <concepts>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ranges>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/detail/thread_context.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/error.hpp>
#include <asio/any_io_executor.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/this_coro.hpp>
#include <asio/post.hpp>
#include <asio/system_error.hpp>

#include "dlock/detail/event_loop_check.hpp"
#include "dlock/dlock.hpp"

namespace dlock {
namespace detail {

// One operation's handler and the work that keeps its executor running
// until it is called; shared, so that AsyncDone (copyable) can carry a
// move-only handler.
template <typename Handler>
struct AsioCompletion {
  using Executor = asio::associated_executor_t<Handler>;
  AsioCompletion(Handler h) : handler(std::move(h)), work(asio::make_work_guard(asio::get_associated_executor(handler))) {}
  Handler handler;
  asio::executor_work_guard<Executor> work;
};

// Starts `start` (which takes a std::function<void(std::exception_ptr, Result, bool cancelled)>: an
// AsyncDone, an AsyncSetDone) as an Asio operation of signature void(std::exception_ptr, Result).
template <typename Result, typename Start, typename CompletionToken>
auto async_dlock_operation(Start start, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::exception_ptr, Result)>(
      [](auto handler, Start start) {
        using Handler = decltype(handler);
        auto slot = asio::get_associated_cancellation_slot(handler);
        auto completion = std::make_shared<AsioCompletion<Handler>>(std::move(handler));
        std::function<void(std::exception_ptr, Result, bool)> done =
            [completion](std::exception_ptr error, Result guard, bool cancelled) {
              if (cancelled) error = std::make_exception_ptr(asio::system_error(asio::error::operation_aborted));
              auto executor = completion->work.get_executor();
              asio::post(executor, [completion, error, guard = std::move(guard)]() mutable {
                asio::get_associated_cancellation_slot(completion->handler).clear();
                auto work = std::move(completion->work);
                std::move(completion->handler)(error, std::move(guard));
              });
            };
        std::shared_ptr<AsyncOperation> operation = start(std::move(done));
        if (slot.is_connected() && operation) {
          slot.assign([operation](asio::cancellation_type type) {
            if (type != asio::cancellation_type::none) operation->cancel();
          });
        }
      },
      token, std::move(start));
}

inline auto async_start(RedisLockService& service, AsyncRequest request) {
  return [&service, request = std::move(request)](AsyncDone done) mutable {
    return service.start_async(std::move(request), std::move(done));
  };
}

template <typename Keys>
std::vector<std::string> key_set(const Keys& keys) {
  std::vector<std::string> set;
  for (auto&& key : keys) set.emplace_back(std::string_view(key));
  return set;
}

inline auto async_start_all(RedisLockService& service, std::vector<std::string> keys, LockOptions options,
                            bool throw_on_timeout) {
  return [&service, keys = std::move(keys), options, throw_on_timeout](AsyncSetDone done) mutable {
    return service.start_async_all(std::move(keys), std::move(options), throw_on_timeout, std::move(done));
  };
}

}  // namespace detail

// lock(): waits up to the options' wait (default lock.wait_ms); LockTimeoutError after it.
template <typename CompletionToken>
auto async_lock(RedisLockService& service, std::string_view key, LockOptions options, CompletionToken&& token) {
  return detail::async_dlock_operation<LockGuard>(
      detail::async_start(service, {detail::AsyncRequest::Kind::lock, std::string(key), options, true}),
      std::forward<CompletionToken>(token));
}

// try_lock(): tries once unless given a wait; an empty guard when busy.
template <typename CompletionToken>
auto async_try_lock(RedisLockService& service, std::string_view key, LockOptions options, CompletionToken&& token) {
  return detail::async_dlock_operation<LockGuard>(
      detail::async_start(service, {detail::AsyncRequest::Kind::lock, std::string(key), options, false}),
      std::forward<CompletionToken>(token));
}

// read_lock() and write_lock() of the read-write lock at `key`.
template <typename CompletionToken>
auto async_read_lock(RedisLockService& service, std::string_view key, LockOptions options, CompletionToken&& token) {
  return detail::async_dlock_operation<LockGuard>(
      detail::async_start(service, {detail::AsyncRequest::Kind::read, std::string(key), options, true}),
      std::forward<CompletionToken>(token));
}

template <typename CompletionToken>
auto async_write_lock(RedisLockService& service, std::string_view key, LockOptions options,
                      CompletionToken&& token) {
  return detail::async_dlock_operation<LockGuard>(
      detail::async_start(service, {detail::AsyncRequest::Kind::write, std::string(key), options, true}),
      std::forward<CompletionToken>(token));
}

// lock_all(): every key of the set, or none, in one order for every caller
// (sorted), the wait for the whole set; one owner for the set unless given.
// Inside a coroutine, pass a named range rather than a braced list: GCC 12
// cannot keep a braced list's array alive across a co_await.
template <std::ranges::input_range Keys, typename CompletionToken>
  requires std::convertible_to<std::ranges::range_reference_t<Keys>, std::string_view>
auto async_lock_all(RedisLockService& service, const Keys& keys, LockOptions options, CompletionToken&& token) {
  return detail::async_dlock_operation<MultiLockGuard>(
      detail::async_start_all(service, detail::key_set(keys), options, true), std::forward<CompletionToken>(token));
}
template <typename CompletionToken>
auto async_lock_all(RedisLockService& service, std::initializer_list<std::string_view> keys, LockOptions options,
                    CompletionToken&& token) {
  return detail::async_dlock_operation<MultiLockGuard>(
      detail::async_start_all(service, detail::key_set(keys), options, true), std::forward<CompletionToken>(token));
}

// try_lock_all(): an empty guard when the set is not had (each key tried once unless given a wait).
template <std::ranges::input_range Keys, typename CompletionToken>
  requires std::convertible_to<std::ranges::range_reference_t<Keys>, std::string_view>
auto async_try_lock_all(RedisLockService& service, const Keys& keys, LockOptions options, CompletionToken&& token) {
  return detail::async_dlock_operation<MultiLockGuard>(
      detail::async_start_all(service, detail::key_set(keys), options, false), std::forward<CompletionToken>(token));
}
template <typename CompletionToken>
auto async_try_lock_all(RedisLockService& service, std::initializer_list<std::string_view> keys, LockOptions options,
                        CompletionToken&& token) {
  return detail::async_dlock_operation<MultiLockGuard>(
      detail::async_start_all(service, detail::key_set(keys), options, false), std::forward<CompletionToken>(token));
}

// Semaphore::acquire(permits).
template <typename CompletionToken>
auto async_acquire(const Semaphore& semaphore, long long permits, LockOptions options, CompletionToken&& token) {
  return detail::async_dlock_operation<LockGuard>(
      [semaphore, permits, options](detail::AsyncDone done) {
        return semaphore.start_async(permits, options, true, std::move(done));
      },
      std::forward<CompletionToken>(token));
}

// LockGuard::unlock() off the caller's thread: completes with the error it
// would throw (LockLostError, ConnectionError), or none.
template <typename CompletionToken>
auto async_unlock(LockGuard&& guard, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::exception_ptr)>(
      [](auto handler, LockGuard guard) {
        using Handler = decltype(handler);
        auto completion = std::make_shared<detail::AsioCompletion<Handler>>(std::move(handler));
        // The release's round trip runs on dlock's I/O threads (an empty guard's "release" at once).
        guard.release_elsewhere([completion](std::exception_ptr error) {
          auto executor = completion->work.get_executor();
          asio::post(executor, [completion, error]() mutable {
            auto work = std::move(completion->work);
            std::move(completion->handler)(error);
          });
        });
      },
      token, std::move(guard));
}

// Cancels the holder's work when its lock is lost: operations bound to
// slot() (asio::bind_cancellation_slot) end with operation_aborted once the
// watchdog finds the lock gone, renewals fail until its validity ran out, or
// a fixed lease runs out (when lost() turns true and the stop token stops):
//
//   dlock::LossCancellation on_loss(guard, co_await asio::this_coro::executor);
//   co_await timer.async_wait(asio::bind_cancellation_slot(on_loss.slot(), asio::use_awaitable));
//
// The cancellation is emitted on `executor`, which must be the one the bound
// operations run on (a strand if its io_context runs on several threads), as
// Asio requires of a cancellation signal. As any Asio slot, it serves one
// operation at a time; an operation bound after the loss is not cancelled
// by it: check lost() before starting one. Takes a LockGuard or a MultiLockGuard.
class LossCancellation {
 public:
  template <typename Guard, typename Executor>
  LossCancellation(const Guard& guard, const Executor& executor)
      : state_(std::make_shared<State>()),
        on_stop_(std::make_unique<std::stop_callback<std::function<void()>>>(
            guard.stop_token(), std::function<void()>([state = state_, executor] {
              // Called on the thread that found the loss (or here, if it is lost already).
              asio::post(executor, [state] { state->signal.emit(asio::cancellation_type::all); });
            }))) {}
  LossCancellation(const LossCancellation&) = delete;
  LossCancellation& operator=(const LossCancellation&) = delete;

  asio::cancellation_slot slot() { return state_->signal.slot(); }

 private:
  // Shared with a pending emit, which may run after this object is gone.
  struct State {
    asio::cancellation_signal signal;
  };
  std::shared_ptr<State> state_;
  std::unique_ptr<std::stop_callback<std::function<void()>>> on_stop_;
};

namespace detail {

// A blocking acquisition owned by the thread, on a thread inside an Asio
// event loop (io_context::run, a thread_pool's thread), is refused with
// InvalidArgument (event_loop_check.hpp): registered by every program that
// includes this header.
inline bool on_asio_event_loop() { return asio::detail::thread_context::top_of_thread_call_stack() != nullptr; }
inline const bool asio_event_loop_check_registered = (set_event_loop_check(&on_asio_event_loop), true);

// A coroutine block's hold: released on dlock's I/O threads when the block
// ends (any way: its end, co_return, an exception), so the io thread never
// waits for the release's round trip; the coroutine's executor has work
// until the release is over (its io_context's run() does not return before).
// A failed release is logged.
class CoBlockGuard {
 public:
  CoBlockGuard(LockGuard guard, asio::any_io_executor executor) : guard_(std::move(guard)), executor_(std::move(executor)) {}
  CoBlockGuard(const CoBlockGuard&) = delete;
  CoBlockGuard& operator=(const CoBlockGuard&) = delete;
  ~CoBlockGuard() {
    guard_.release_elsewhere(nullptr, std::make_shared<asio::executor_work_guard<asio::any_io_executor>>(executor_));
  }
  LockGuard& guard() { return guard_; }
  explicit operator bool() const { return static_cast<bool>(guard_); }

 private:
  LockGuard guard_;
  asio::any_io_executor executor_;
};

template <typename Awaitable>
inline auto co_block_lock(RedisLockService& service, const BlockRequest& request) {
  return async_lock(service, request.key, request.options.lock_options(), Awaitable{});
}

}  // namespace detail

}  // namespace dlock

// The block form for coroutine bodies (asio::awaitable): the blocking
// macros' keys, templates and options, the service found as they find it
// (DISTRIBUTED_LOCK_SERVICE, a LockAware class, the default). The body runs
// holding the lock, with its own owner (no re-entry by thread); the release
// runs off the io thread. LockTimeoutError (and every error of
// async_lock) is thrown by the co_await, before the body.
#define CO_WITH_DISTRIBUTED_LOCK_AS(guard, ...)                                                          \
  if (::dlock::detail::CoBlockGuard guard{co_await ::dlock::detail::co_block_lock<::asio::use_awaitable_t<>>( \
                                             DLOCK_SERVICE_HERE(), ::dlock::detail::block_request(__VA_ARGS__)), \
                                         co_await ::asio::this_coro::executor};                          \
      false) {                                                                                           \
  } else

#define CO_WITH_DISTRIBUTED_LOCK(...) CO_WITH_DISTRIBUTED_LOCK_AS(DLOCK_UNIQUE_NAME(dlock_co_guard_), __VA_ARGS__)
