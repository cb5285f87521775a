#pragma once
// A mutex whose lock may give up at a deadline (BasicLockable, and
// try_lock_until for std::unique_lock). Not std::timed_mutex: libstdc++
// waits for one on the steady clock with pthread_mutex_clocklock, which
// GCC 12's ThreadSanitizer does not intercept, so every unlock after such a
// wait reads to it as an unlock of an unlocked mutex. A plain mutex and a
// condition variable are what every sanitizer follows.

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace dlock::detail {

class DeadlineMutex {
 public:
  void lock() {
    std::unique_lock guard(mutex_);
    freed_.wait(guard, [this] { return !held_; });
    held_ = true;
  }

  template <typename Clock, typename Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    std::unique_lock guard(mutex_);
    if (!freed_.wait_until(guard, deadline, [this] { return !held_; })) return false;
    held_ = true;
    return true;
  }

  void unlock() {
    {
      std::lock_guard guard(mutex_);
      held_ = false;
    }
    freed_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  bool held_ = false;
};

}  // namespace dlock::detail
