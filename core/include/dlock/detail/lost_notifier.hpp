#pragma once
// Runs on_lost hooks on a thread of their own, one at a time, in the order
// the losses were found. The watchdog marks a lock lost (flag, stop token,
// log) at once on its own thread and posts the hook here, so a slow hook
// delays neither renewals nor other locks' loss. The thread starts when a
// hook is set (or on the first loss); it keeps only the hooks and keys posted, never the service, so
// a hook may drop the last reference to the service that posted it.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <spdlog/logger.h>

namespace dlock::detail {

class LostNotifier {
 public:
  using Hook = std::function<void(const std::string& key)>;

  // `logger` must outlive this notifier; the thread, which may outlive it,
  // logs through it only until the notifier is destroyed.
  explicit LostNotifier(spdlog::logger& logger);
  // Runs the hooks still posted, then joins; from inside a hook, detaches
  // instead (the thread then finishes the queue and exits by itself).
  ~LostNotifier();
  LostNotifier(const LostNotifier&) = delete;
  LostNotifier& operator=(const LostNotifier&) = delete;

  // Starts the thread (else the first post does).
  void start();

  void post(Hook hook, std::string key);

 private:
  struct State {
    std::mutex mutex;
    // Guarded by mutex; null once the notifier is gone. Never a shared_ptr:
    // the thread, detached when a hook drops the service, must not hold a
    // reference to a logger it does not own.
    spdlog::logger* logger = nullptr;
    std::condition_variable posted;               // with mutex
    std::deque<std::pair<Hook, std::string>> queue;  // guarded by mutex
    bool stopping = false;                        // guarded by mutex
  };
  static void run(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;
  std::thread thread_;  // started under State::mutex on the first post
};

}  // namespace dlock::detail
