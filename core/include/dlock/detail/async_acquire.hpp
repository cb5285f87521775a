#pragma once
// The core of the async API (<dlock/asio.hpp> wraps it in Asio's completion
// tokens; the library itself needs no Asio). An async acquisition runs the
// same steps as a blocking one (lock/acquisition.hpp), its round trips on
// dlock's I/O threads (io_threads.hpp), and sleeps in line without a thread:
// a timer and a place in the waiter table, woken by the release notice, by
// an in-process hand-off, or by cancel().

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dlock/lock_guard.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/multi_lock_guard.hpp"

namespace dlock::detail {

// What an async acquisition asks for.
struct AsyncRequest {
  enum class Kind { lock, read, write, permits };
  Kind kind = Kind::lock;
  std::string key;             // the lock's key, or the semaphore's name
  LockOptions options;
  bool throw_on_timeout = true;  // false: an empty guard when the wait runs out (the try forms)
  long long permits = 1;        // permits asked (a semaphore)
  long long count_if_new = 0;   // a semaphore's count if it has none yet
};

// Called once, on one of dlock's I/O threads: the guard, or the error the
// blocking call would have thrown, or `cancelled` (then neither: nothing is held).
using AsyncDone = std::function<void(std::exception_ptr error, LockGuard guard, bool cancelled)>;

// The same for a set of keys (async_lock_all).
using AsyncSetDone = std::function<void(std::exception_ptr error, MultiLockGuard guard, bool cancelled)>;

class AsyncOperation {
 public:
  virtual ~AsyncOperation() = default;
  // From any thread, at any time: a waiting acquisition leaves the line at
  // once and completes cancelled; a grant that raced the cancellation is
  // released first. Nothing after completion.
  virtual void cancel() = 0;
};

}  // namespace dlock::detail
