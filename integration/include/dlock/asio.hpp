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

#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/error.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/system_error.hpp>

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

// Starts `start` (which takes an AsyncDone) as an Asio operation of signature void(std::exception_ptr, Result).
template <typename Result, typename Start, typename CompletionToken>
auto async_dlock_operation(Start start, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::exception_ptr, Result)>(
      [](auto handler, Start start) {
        using Handler = decltype(handler);
        auto slot = asio::get_associated_cancellation_slot(handler);
        auto completion = std::make_shared<AsioCompletion<Handler>>(std::move(handler));
        std::shared_ptr<AsyncOperation> operation =
            start([completion](std::exception_ptr error, LockGuard guard, bool cancelled) {
              if (cancelled) error = std::make_exception_ptr(asio::system_error(asio::error::operation_aborted));
              auto executor = completion->work.get_executor();
              asio::post(executor, [completion, error, guard = std::move(guard)]() mutable {
                asio::get_associated_cancellation_slot(completion->handler).clear();
                auto work = std::move(completion->work);
                std::move(completion->handler)(error, Result(std::move(guard)));
              });
            });
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

namespace detail {

// A coroutine block's hold: released on dlock's I/O threads when the block
// ends (any way: its end, co_return, an exception), so the io thread never
// waits for the release's round trip. A failed release is logged.
class CoBlockGuard {
 public:
  explicit CoBlockGuard(LockGuard guard) : guard_(std::move(guard)) {}
  CoBlockGuard(const CoBlockGuard&) = delete;
  CoBlockGuard& operator=(const CoBlockGuard&) = delete;
  ~CoBlockGuard() { guard_.release_elsewhere(nullptr); }
  LockGuard& guard() { return guard_; }
  explicit operator bool() const { return static_cast<bool>(guard_); }

 private:
  LockGuard guard_;
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
          DLOCK_SERVICE_HERE(), ::dlock::detail::block_request(__VA_ARGS__))};                           \
      false) {                                                                                           \
  } else

#define CO_WITH_DISTRIBUTED_LOCK(...) CO_WITH_DISTRIBUTED_LOCK_AS(DLOCK_UNIQUE_NAME(dlock_co_guard_), __VA_ARGS__)
