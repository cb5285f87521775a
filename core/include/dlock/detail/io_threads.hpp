#pragma once
// dlock's own threads for the async API: a fixed few that run its Redis
// round trips (each a blocking call on one of them, never on the caller's
// executor), and one more for its timers (a wait's end, a nap in line),
// which never waits for Redis: a timer's job must be quick and never block
// (it posts what needs a round trip), so a deadline or a cancellation is
// kept even while every I/O thread waits on a frozen server. A waiting
// async acquisition holds no thread: it is a timer and a place in the
// waiter table. Started at the first post; joined when the service goes (a
// job keeps its acquisition, and so the service's core, alive until it ran).

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
#include <deque>

namespace dlock::detail {

class IoThreads {
 public:
  using Clock = std::chrono::steady_clock;
  using Job = std::function<void()>;

  explicit IoThreads(std::size_t threads);
  ~IoThreads();  // runs what is due, drops timers not yet due, joins
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  // Runs `job` on one of the threads, as soon as one is free.
  void post(Job job);
  // Runs `job` on one of the threads after every job posted to `lane`
  // before it ran, and before the next starts: one at a time, in posting
  // order. Other work runs between them.
  void post_in_order(const std::string& lane, Job job);
  // Runs `job` on the timer thread at `when` (or soon after): it must be
  // quick and must not block. The returned number cancels it (cancel()
  // returns false once it started or ran).
  std::uint64_t at(Clock::time_point when, Job job);
  bool cancel(std::uint64_t timer);

  // Whether the calling thread is one of these (a blocking call there would stall every async call).
  bool on_io_thread() const;

 private:
  // Shared with the threads: a job may drop the last reference to what owns
  // this object, which is then destroyed on one of these threads (that one
  // is detached, not joined, and finds `stopping` when its job returns).
  struct Shared {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<Job> ready;                                                  // guarded by mutex
    using Timers = std::multimap<Clock::time_point, std::pair<std::uint64_t, Job>>;
    Timers timers;                                                  // guarded by mutex
    std::unordered_map<std::uint64_t, Timers::iterator> timer_ids;  // guarded by mutex: cancel() without a scan
    // guarded by mutex: each lane with a job ready or running, and those posted after it
    std::unordered_map<std::string, std::deque<Job>> lanes;
    std::condition_variable timer_wake;
    std::uint64_t next_timer = 1;                                   // guarded by mutex
    bool stopping = false;                                          // guarded by mutex
  };
  static void run(const std::shared_ptr<Shared>& shared);
  static void run_timers(const std::shared_ptr<Shared>& shared);
  // `job`, then readies the next of its lane (or ends the lane).
  static Job in_lane(Shared* shared, std::string lane, Job job);
  void start_locked();

  const std::size_t count_;
  const std::shared_ptr<Shared> shared_;
  std::vector<std::thread> threads_;  // guarded by shared_->mutex
};

}  // namespace dlock::detail
