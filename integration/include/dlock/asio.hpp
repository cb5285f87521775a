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

#include <algorithm>
#include <concepts>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
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
#include <asio/query.hpp>
#include <asio/system_executor.hpp>
#include <asio/execution.hpp>
#include <asio/execution_context.hpp>
#include <asio/any_io_executor.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/this_coro.hpp>
#include <asio/post.hpp>
#include <asio/system_error.hpp>

#include "dlock/detail/event_loop_check.hpp"
#include "dlock/dlock.hpp"

namespace dlock {
namespace detail {

// Whether an execution context still runs: dlock's threads complete
// operations and drop work only while it does, under `mutex`, so that a
// context shut down (an io_context destroyed with waits pending) is never
// touched again from them.
struct ContextLife {
  std::mutex mutex;
  bool alive = true;  // guarded by mutex
};

// The dlock operations pending on one execution context. Its shutdown (the
// context's destruction) marks the context gone, then destroys their
// handlers while it still exists (a coroutine's frame with its handler, as
// Asio's own operations do) and cancels them: a grant that comes later is
// released on dlock's thread instead of being posted to a context that is gone.
class PendingOperations final : public asio::execution_context::service {
 public:
  struct Entry {
    virtual ~Entry() = default;
    virtual void abandon() = 0;
  };

  inline static asio::execution_context::id id;

  explicit PendingOperations(asio::execution_context& context)
      : asio::execution_context::service(context), life_(std::make_shared<ContextLife>()) {}

  const std::shared_ptr<ContextLife>& life() const { return life_; }

  void add(const std::shared_ptr<Entry>& entry) {
    {
      std::lock_guard lock(mutex_);
      if (!shut_down_) {
        // Finished operations' entries are pruned as the list doubles: amortised O(1) per add.
        if (entries_.size() >= prune_at_) {
          std::erase_if(entries_, [](const std::weak_ptr<Entry>& e) { return e.expired(); });
          prune_at_ = std::max<std::size_t>(64, entries_.size() * 2);
        }
        entries_.push_back(entry);
        return;
      }
    }
    entry->abandon();
  }

  template <typename Executor>
  static PendingOperations& of(const Executor& executor) {
    if constexpr (asio::can_query<const Executor&, asio::execution::context_t>::value) {
      return asio::use_service<PendingOperations>(asio::query(executor, asio::execution::context));
    } else if constexpr (requires { executor.context(); }) {
      return asio::use_service<PendingOperations>(executor.context());
    } else {
      // An executor of no context (use_future's runs the handler where it is completed): the program's.
      return asio::use_service<PendingOperations>(asio::system_executor().context());
    }
  }

 private:
  void shutdown() override {
    std::vector<std::weak_ptr<Entry>> entries;
    {
      std::lock_guard lock(mutex_);
      shut_down_ = true;
      entries.swap(entries_);
    }
    // Abandoned while the context still counts as alive, so that what they hold of it (a strand's
    // executor, work) is destroyed now, while the services it needs exist; then marked gone.
    for (const std::weak_ptr<Entry>& weak : entries) {
      if (std::shared_ptr<Entry> entry = weak.lock()) entry->abandon();
    }
    std::lock_guard lock(life_->mutex);
    life_->alive = false;
  }

  const std::shared_ptr<ContextLife> life_;
  std::mutex mutex_;
  std::vector<std::weak_ptr<Entry>> entries_;  // guarded by mutex_
  std::size_t prune_at_ = 64;                  // guarded by mutex_
  bool shut_down_ = false;                     // guarded by mutex_
};

// A value bound to an execution context (work on it, one of its executors,
// a handler that runs on it) that any thread may drop, but that is destroyed
// only while the context lives: once it shut down there is nobody left to
// tell, and a strand's destructor would lock a mutex freed with it (what is
// not destroyed then owns nothing the program still needs).
template <typename T>
class WhileAlive {
 public:
  template <typename... Args>
  explicit WhileAlive(std::shared_ptr<ContextLife> life, Args&&... args) : life_(std::move(life)) {
    new (&slot_.value) T(std::forward<Args>(args)...);
  }
  WhileAlive(const WhileAlive&) = delete;
  WhileAlive& operator=(const WhileAlive&) = delete;
  ~WhileAlive() {
    std::lock_guard lock(life_->mutex);
    drop_locked();
  }

  // The rest with life()->mutex held.
  bool held_locked() const { return held_; }
  T& get_locked() { return slot_.value; }
  T take_locked() {
    T taken(std::move(slot_.value));
    drop_locked();
    return taken;
  }
  void drop_locked() {
    if (!held_) return;
    held_ = false;
    if (life_->alive) slot_.value.~T();
  }

 private:
  union Slot {
    Slot() {}
    ~Slot() {}
    T value;
  };
  const std::shared_ptr<ContextLife> life_;
  Slot slot_;
  bool held_ = true;  // guarded by life_->mutex
};

template <typename Executor>
using ContextWork = WhileAlive<asio::executor_work_guard<Executor>>;

// Work on an executor, kept until dropped (CO_WITH_DISTRIBUTED_LOCK's release
// keeps one), or until the context's shutdown.
template <typename Executor>
class KeptWork final : public PendingOperations::Entry {
 public:
  KeptWork(std::shared_ptr<ContextLife> life, const Executor& executor)
      : life_(life), work_(std::move(life), asio::make_work_guard(executor)) {}
  void abandon() override {
    std::lock_guard lock(life_->mutex);
    work_.drop_locked();
  }

 private:
  const std::shared_ptr<ContextLife> life_;
  ContextWork<Executor> work_;
};

template <typename Executor>
std::shared_ptr<void> keep_work(const Executor& executor) {
  PendingOperations& registry = PendingOperations::of(executor);
  auto kept = std::make_shared<KeptWork<Executor>>(registry.life(), executor);
  registry.add(kept);
  return kept;
}

// One operation's handler, kept until it is called on its executor, or
// destroyed by the context's shutdown; with work on that executor until the
// operation is over (the last reference to this goes then).
template <typename Handler>
class AsioCompletion final : public PendingOperations::Entry,
                             public std::enable_shared_from_this<AsioCompletion<Handler>> {
 public:
  using Executor = asio::associated_executor_t<Handler>;

  explicit AsioCompletion(Handler handler)
      : registry_(PendingOperations::of(asio::get_associated_executor(handler))),
        life_(registry_.life()),
        executor_(life_, asio::get_associated_executor(handler)),
        work_(life_, asio::make_work_guard(asio::get_associated_executor(handler))),
        handler_(life_, std::move(handler)) {}

  // Registered once shared (the context is alive: this runs in the initiating call).
  void enter() { registry_.add(this->shared_from_this()); }

  void watch(std::shared_ptr<AsyncOperation> operation) {
    bool gone = false;
    {
      std::lock_guard lock(life_->mutex);
      gone = !handler_.held_locked();
      if (!gone) operation_ = operation;
    }
    if (gone) operation->cancel();
  }

  // From a dlock thread: the handler's call is posted to its executor; with
  // the context gone, `args` (a guard) are dropped here instead: released.
  template <typename... Args>
  void complete(Args... args) {
    std::lock_guard lock(life_->mutex);
    if (!life_->alive || !handler_.held_locked()) return;
    asio::post(executor_.get_locked(), [self = this->shared_from_this(), ... args = std::move(args)]() mutable {
      self->invoke(std::move(args)...);
    });
  }

  // The context's shutdown (it is marked gone just after).
  void abandon() override {
    std::optional<Handler> handler;
    std::shared_ptr<AsyncOperation> operation;
    {
      std::lock_guard lock(life_->mutex);
      if (handler_.held_locked()) handler.emplace(handler_.take_locked());
      executor_.drop_locked();
      work_.drop_locked();
      operation = std::move(operation_);
    }
    if (operation) operation->cancel();
    // The handler (a coroutine's frame with it) is destroyed here, while the context still exists.
  }

 private:
  template <typename... Args>
  void invoke(Args&&... args) {
    std::optional<Handler> handler;
    {
      std::lock_guard lock(life_->mutex);
      if (handler_.held_locked()) handler.emplace(handler_.take_locked());
      operation_.reset();
    }
    if (!handler) return;
    asio::get_associated_cancellation_slot(*handler).clear();
    std::move (*handler)(std::forward<Args>(args)...);
  }

  PendingOperations& registry_;                // used only in the initiating call
  const std::shared_ptr<ContextLife> life_;
  WhileAlive<Executor> executor_;
  ContextWork<Executor> work_;
  WhileAlive<Handler> handler_;                // guarded by life_->mutex
  std::shared_ptr<AsyncOperation> operation_;  // guarded by life_->mutex
};

template <typename Handler>
std::shared_ptr<AsioCompletion<Handler>> make_completion(Handler handler) {
  auto completion = std::make_shared<AsioCompletion<Handler>>(std::move(handler));
  completion->enter();
  return completion;
}

// Starts `start` (which takes a std::function<void(std::exception_ptr, Result, bool cancelled)>: an
// AsyncDone, an AsyncSetDone) as an Asio operation of signature void(std::exception_ptr, Result).
template <typename Result, typename Start, typename CompletionToken>
auto async_dlock_operation(Start start, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(std::exception_ptr, Result)>(
      [](auto handler, Start start) {
        auto slot = asio::get_associated_cancellation_slot(handler);
        auto completion = make_completion(std::move(handler));
        std::function<void(std::exception_ptr, Result, bool)> done =
            [completion](std::exception_ptr error, Result guard, bool cancelled) {
              if (cancelled) error = std::make_exception_ptr(asio::system_error(asio::error::operation_aborted));
              completion->complete(std::move(error), std::move(guard));
            };
        std::shared_ptr<AsyncOperation> operation = start(std::move(done));
        if (!operation) return;
        completion->watch(operation);
        if (slot.is_connected()) {
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
        auto completion = detail::make_completion(std::move(handler));
        // The release's round trip runs on dlock's I/O threads (an empty guard's "release" at once).
        guard.release_elsewhere([completion](std::exception_ptr error) { completion->complete(std::move(error)); });
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
// until the release is sent (its io_context's run() does not return before);
// its reply is read off the caller's path, as a guard's destructor's is
// (docs/locks.md, "The release: off the caller's path"). A failed release is logged.
class CoBlockGuard {
 public:
  CoBlockGuard(LockGuard guard, asio::any_io_executor executor) : guard_(std::move(guard)), executor_(std::move(executor)) {}
  CoBlockGuard(const CoBlockGuard&) = delete;
  CoBlockGuard& operator=(const CoBlockGuard&) = delete;
  ~CoBlockGuard() { guard_.release_elsewhere(nullptr, keep_work(executor_)); }
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
                                             DLOCK_SERVICE_HERE_PLAIN(), ::dlock::detail::block_request(__VA_ARGS__)), \
                                         co_await ::asio::this_coro::executor};                          \
      false) {                                                                                           \
  } else

#define CO_WITH_DISTRIBUTED_LOCK(...) CO_WITH_DISTRIBUTED_LOCK_AS(DLOCK_UNIQUE_NAME(dlock_co_guard_), __VA_ARGS__)
