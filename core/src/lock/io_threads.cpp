// dlock's own threads for the async API (io_threads.hpp): a queue of jobs and a map of timers.
#include "dlock/detail/io_threads.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace dlock::detail {
namespace {

thread_local const void* current_io_threads = nullptr;
thread_local bool orphaned_self = false;  // this thread destroyed its own IoThreads and was detached

// dlock's threads that may still touch static objects (spdlog's registry)
// as the process exits: those running a job (its end may drop the last of a
// service, which that thread then destroys) and those detached while
// destroying one. Never destroyed (a plain atomic in static storage): a
// thread may count out after the exit stopped waiting for it.
std::atomic<int>& threads_at_work() {
  static std::atomic<int> count{0};
  return count;
}

// The process' exit waits (10 s at most) until no dlock thread is at work.
// Made at the first start, after the service and the logging it uses:
// destroyed, and so waiting, before them.
struct ExitWait {
  // A fork child inherits the count but none of the threads: its exit does not wait.
  const pid_t made_by = ::getpid();
  ~ExitWait() {
    if (::getpid() != made_by) return;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (threads_at_work().load() > 0 && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
};

void wait_at_exit() { static ExitWait wait; }

// Around each job: the job in which a thread was left destroying its own
// service (detached, orphaned_self) keeps its count until the thread ends.
thread_local bool counted_as_orphan = false;
void start_work() { threads_at_work().fetch_add(1); }
void end_work() {
  if (orphaned_self && !counted_as_orphan) {
    counted_as_orphan = true;
    return;
  }
  threads_at_work().fetch_sub(1);
}
void count_out_if_orphaned() {
  if (counted_as_orphan) threads_at_work().fetch_sub(1);
}

}  // namespace

IoThreads::IoThreads(std::size_t threads)
    : count_(std::max<std::size_t>(threads, 1)), shared_(std::make_shared<Shared>()) {}

IoThreads::~IoThreads() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stopping = true;
    shared_->timers.clear();
    shared_->timer_ids.clear();
    threads = std::move(threads_);
  }
  shared_->wake.notify_all();
  shared_->timer_wake.notify_all();
  for (std::thread& thread : threads) {
    if (thread.get_id() == std::this_thread::get_id()) {
      orphaned_self = true;  // still counted at work (its job's count) until it ends
      thread.detach();
    } else {
      thread.join();
    }
  }
}

void IoThreads::start_locked() {
  if (!threads_.empty() || shared_->stopping) return;
  wait_at_exit();  // made now, so destroyed before what the service made earlier
  for (std::size_t i = 0; i < count_; ++i) {
    threads_.emplace_back([shared = shared_] { run(shared); });
  }
  threads_.emplace_back([shared = shared_] { run_timers(shared); });
}

void IoThreads::post(Job job) {
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->stopping) return;
    start_locked();
    shared_->ready.push_back(std::move(job));
  }
  shared_->wake.notify_one();
}

void IoThreads::post_in_order(const std::string& lane, Job job) {
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->stopping) return;
    start_locked();
    auto [waiting, first] = shared_->lanes.try_emplace(lane);
    if (!first) {
      waiting->second.push_back(std::move(job));  // readied when the one before it is done
      return;
    }
    shared_->ready.push_back(in_lane(shared_.get(), lane, std::move(job)));
  }
  shared_->wake.notify_one();
}

IoThreads::Job IoThreads::in_lane(Shared* shared, std::string lane, Job job) {
  // `shared` outlives the job: jobs ready are run, even while stopping, by threads that hold it.
  return [shared, lane = std::move(lane), job = std::move(job)]() mutable {
    job();
    job = nullptr;
    {
      std::lock_guard lock(shared->mutex);
      const auto waiting = shared->lanes.find(lane);
      if (waiting->second.empty()) {
        shared->lanes.erase(waiting);
        return;
      }
      Job next = std::move(waiting->second.front());
      waiting->second.pop_front();
      // At the back of the queue, even while stopping (it was posted before): other work runs between.
      shared->ready.push_back(in_lane(shared, std::move(lane), std::move(next)));
    }
    shared->wake.notify_one();
  };
}

std::uint64_t IoThreads::at(Clock::time_point when, Job job) {
  std::uint64_t id = 0;
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->stopping) return 0;
    start_locked();
    id = shared_->next_timer++;
    shared_->timer_ids.emplace(id, shared_->timers.emplace(when, std::make_pair(id, std::move(job))));
  }
  shared_->timer_wake.notify_one();  // it may now have an earlier timer to wake for
  return id;
}

bool IoThreads::cancel(std::uint64_t timer) {
  Job dropped;  // destroyed outside the mutex: it may hold the last reference to anything
  std::lock_guard lock(shared_->mutex);
  const auto found = shared_->timer_ids.find(timer);
  if (found == shared_->timer_ids.end()) return false;
  dropped = std::move(found->second->second.second);
  shared_->timers.erase(found->second);
  shared_->timer_ids.erase(found);
  return true;
}

bool IoThreads::on_io_thread() const { return current_io_threads == shared_.get(); }

void IoThreads::run(const std::shared_ptr<Shared>& shared) {
  current_io_threads = shared.get();
  std::unique_lock lock(shared->mutex);
  for (;;) {
    if (!shared->ready.empty()) {
      Job job = std::move(shared->ready.front());
      shared->ready.pop_front();
      if (!shared->ready.empty()) shared->wake.notify_one();
      lock.unlock();
      start_work();
      job();
      job = nullptr;  // what it held goes before the lock is taken again
      end_work();
      lock.lock();
      continue;
    }
    if (shared->stopping) break;
    shared->wake.wait(lock);
  }
  lock.unlock();
  count_out_if_orphaned();
}

void IoThreads::run_timers(const std::shared_ptr<Shared>& shared) {
  current_io_threads = shared.get();
  std::unique_lock lock(shared->mutex);
  for (;;) {
    if (shared->stopping) break;
    if (!shared->timers.empty() && shared->timers.begin()->first <= Clock::now()) {
      Job job = std::move(shared->timers.begin()->second.second);
      shared->timer_ids.erase(shared->timers.begin()->second.first);
      shared->timers.erase(shared->timers.begin());
      lock.unlock();
      start_work();
      job();
      job = nullptr;
      end_work();
      lock.lock();
      continue;
    }
    if (shared->timers.empty()) {
      shared->timer_wake.wait(lock);
    } else {
      // A copy: cancel() may erase that timer while this thread waits for it.
      const Clock::time_point next = shared->timers.begin()->first;
      shared->timer_wake.wait_until(lock, next);
    }
  }
  lock.unlock();
  count_out_if_orphaned();
}

}  // namespace dlock::detail
