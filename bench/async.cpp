// Part async: the async API (<dlock/asio.hpp>) on one io_context thread.
//
//   A  200 coroutines, 4 keys, each critical section awaiting a 1 ms timer:
//      critical sections per second of dlock's async_lock/async_unlock, of
//      the in-process ceiling (a per-key async mutex, no Redis) and of the
//      workaround a user writes today (that async mutex in front of the
//      blocking API run on a 4-thread asio::thread_pool).
//   B  the same while a second process (this binary, --async-contender)
//      takes the same keys with the blocking API, one thread per key, 1 ms
//      inside; dlock async against the pool workaround. Every hold of both
//      processes is recorded and checked for overlap per key.
//   C  10,000 coroutines waiting on one key another service instance holds,
//      then released: dlock's threads, memory per waiter, the load of waiting,
//      and whether the grants came in the order of the line.
//
// Every run has a heartbeat on the same io_context: a coroutine awaiting a
// 1 ms timer in a loop, recording how late each wake is. The targets are
// printed next to the figures, never asserted.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "bench_target.hpp"
#include "dlock/asio.hpp"
#include "raw_connection.hpp"
#include "server_stats.hpp"

namespace bench {
namespace {

using namespace std::chrono_literals;

constexpr int kKeys = 4;
constexpr int kCoroutines = 200;
constexpr int kPoolThreads = 4;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
std::int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string key_name(int key) { return "bench:async:" + std::to_string(key); }

// ---------------------------------------------------------------------------
// A per-key async mutex for coroutines of ONE io_context thread (no locking
// inside): FIFO, the unlocker hands the mutex straight to the oldest waiter.

class AsyncMutex {
 public:
  template <typename Token>
  auto async_lock(Token&& token) {
    return asio::async_initiate<Token, void()>(Initiate{this}, token);
  }

  void unlock() {
    if (waiting_.empty()) {
      locked_ = false;
      return;
    }
    std::unique_ptr<Waiting> next = std::move(waiting_.front());
    waiting_.pop_front();
    next->resume();  // still locked: now the next one's
  }

 private:
  struct Waiting {
    virtual ~Waiting() = default;
    virtual void resume() = 0;
  };
  template <typename Handler>
  struct WaitingFor final : Waiting {
    explicit WaitingFor(Handler h) : handler(std::move(h)) {}
    void resume() override {
      auto executor = asio::get_associated_executor(handler);
      asio::post(executor, std::move(handler));
    }
    Handler handler;
  };
  struct Initiate {
    AsyncMutex* self;
    template <typename Handler>
    void operator()(Handler handler) const {
      if (!self->locked_) {
        self->locked_ = true;
        auto executor = asio::get_associated_executor(handler);
        asio::post(executor, std::move(handler));
        return;
      }
      self->waiting_.push_back(std::make_unique<WaitingFor<Handler>>(std::move(handler)));
    }
  };

  bool locked_ = false;
  std::deque<std::unique_ptr<Waiting>> waiting_;
};

// ---------------------------------------------------------------------------
// Running a blocking call on a thread pool and awaiting it from a coroutine
// (what a user of the blocking API writes today).

template <typename Handler, typename Result>
struct PoolCompletion {
  Handler handler;
  std::exception_ptr error;
  Result result;
  void operator()() { std::move(handler)(error, std::move(result)); }
};

template <typename Handler, typename Job, typename Result>
struct PoolJob {
  Handler handler;
  Job job;
  asio::executor_work_guard<asio::associated_executor_t<Handler>> work;
  void operator()() {
    std::exception_ptr error;
    Result result{};
    try {
      result = job();
    } catch (...) {
      error = std::current_exception();
    }
    auto executor = work.get_executor();
    asio::post(executor, PoolCompletion<Handler, Result>{std::move(handler), error, std::move(result)});
    work.reset();
  }
};

template <typename Result>
struct RunOnPool {
  asio::thread_pool* pool;
  template <typename Handler, typename Job>
  void operator()(Handler handler, Job job) const {
    auto work = asio::make_work_guard(asio::get_associated_executor(handler));
    asio::post(*pool, PoolJob<Handler, Job, Result>{std::move(handler), std::move(job), std::move(work)});
  }
};

template <typename Result, typename Job>
auto on_pool(asio::thread_pool& pool, Job job) {
  return asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr, Result)>(
      RunOnPool<Result>{&pool}, asio::use_awaitable, std::move(job));
}

struct BlockingLock {
  dlock::RedisLockService* service;
  const std::string* key;
  // Each acquisition its own owner, as each async acquisition is.
  dlock::LockGuard operator()() const {
    return service->lock(*key, {.wait = dlock::Millis(60000), .owner = dlock::Owner::create()});
  }
};

struct BlockingUnlock {
  std::shared_ptr<dlock::LockGuard> guard;
  bool operator()() const {
    guard->unlock();
    return true;
  }
};

// ---------------------------------------------------------------------------
// The three ways to take a key, each with lock(key) and unlock(key, hold).

struct CeilingLocker {
  std::array<AsyncMutex, kKeys> mutexes;
  asio::awaitable<int> lock(int key) {
    co_await mutexes[static_cast<std::size_t>(key)].async_lock(asio::use_awaitable);
    co_return 0;
  }
  asio::awaitable<void> unlock(int key, int) {
    mutexes[static_cast<std::size_t>(key)].unlock();
    co_return;
  }
};

struct DlockLocker {
  dlock::RedisLockService* service;
  std::vector<std::string> keys;
  asio::awaitable<dlock::LockGuard> lock(int key) {
    co_return co_await dlock::async_lock(*service, keys[static_cast<std::size_t>(key)],
                                         dlock::LockOptions{.wait = dlock::Millis(60000)}, asio::use_awaitable);
  }
  asio::awaitable<void> unlock(int, dlock::LockGuard guard) {
    co_await dlock::async_unlock(std::move(guard), asio::use_awaitable);
  }
};

struct PoolLocker {
  dlock::RedisLockService* service;
  std::vector<std::string> keys;
  asio::thread_pool* pool;
  std::array<AsyncMutex, kKeys> mutexes;
  asio::awaitable<dlock::LockGuard> lock(int key) {
    co_await mutexes[static_cast<std::size_t>(key)].async_lock(asio::use_awaitable);
    // Named, not a temporary inside the co_await: GCC 12 mishandles those.
    auto op = on_pool<dlock::LockGuard>(*pool, BlockingLock{service, &keys[static_cast<std::size_t>(key)]});
    dlock::LockGuard guard = co_await std::move(op);
    co_return guard;
  }
  asio::awaitable<void> unlock(int key, dlock::LockGuard guard) {
    auto op = on_pool<bool>(*pool, BlockingUnlock{std::make_shared<dlock::LockGuard>(std::move(guard))});
    co_await std::move(op);
    mutexes[static_cast<std::size_t>(key)].unlock();
  }
};

// ---------------------------------------------------------------------------
// One run of workload A or B, and the heartbeat beside it.

struct Hold {
  int key = 0;
  std::int64_t acquired_ns = 0;
  std::int64_t released_ns = 0;
};

struct Run {
  Clock::time_point start, end;
  std::array<int, kKeys> inside{};
  long long overlaps = 0;
  long long sections = 0;  // released within [start, end]
  std::vector<Hold> holds;
  int live = 0;
  std::atomic<bool> stop_heartbeat{false};
  Samples lag;
  long long context_switches = 0;  // the whole process's (every thread), over the run
  std::string error;
};

long long context_switches() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_nvcsw + usage.ru_nivcsw;
}

asio::awaitable<void> heartbeat(Run& run) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!run.stop_heartbeat.load()) {
    const Clock::time_point due = Clock::now() + 1ms;
    timer.expires_at(due);
    co_await timer.async_wait(asio::use_awaitable);
    run.lag.add(Clock::now() - due);
  }
}

template <typename Locker>
asio::awaitable<void> worker(Locker& locker, int key, Run& run) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  auto& inside = run.inside[static_cast<std::size_t>(key)];
  while (Clock::now() < run.end) {
    auto hold = co_await locker.lock(key);
    const Clock::time_point acquired = Clock::now();
    if (inside++ != 0) ++run.overlaps;
    timer.expires_after(1ms);
    co_await timer.async_wait(asio::use_awaitable);
    --inside;
    const Clock::time_point released = Clock::now();
    co_await locker.unlock(key, std::move(hold));
    if (released >= run.start && released <= run.end) ++run.sections;
    run.holds.push_back({key, ns_of(acquired), ns_of(released)});
  }
}

struct Finished {
  Run* run;
  void operator()(std::exception_ptr error) const {
    if (error && run->error.empty()) {
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        run->error = e.what();
      }
    }
    if (--run->live == 0) run->stop_heartbeat = true;
  }
};

struct HeartbeatDone {
  void operator()(std::exception_ptr) const {}
};

// Runs kCoroutines workers of `locker` (coroutine i on key i % kKeys) on this
// thread's io_context from `start` for `seconds`.
template <typename Locker>
void run_workload(Locker& locker, Run& run, Clock::time_point start, double seconds) {
  asio::io_context io;
  std::this_thread::sleep_until(start);
  run.start = Clock::now();
  run.end = run.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  run.live = kCoroutines;
  asio::co_spawn(io, heartbeat(run), HeartbeatDone{});
  for (int i = 0; i < kCoroutines; ++i) asio::co_spawn(io, worker(locker, i % kKeys, run), Finished{&run});
  const long long switches = context_switches();
  io.run();
  run.context_switches = context_switches() - switches;
}

// From one holder's release to the next holder's acquisition of the same key, within this process.
Samples handoff_gaps(std::vector<Hold> holds) {
  std::sort(holds.begin(), holds.end(), [](const Hold& a, const Hold& b) {
    return a.key != b.key ? a.key < b.key : a.acquired_ns < b.acquired_ns;
  });
  Samples gaps;
  for (std::size_t i = 1; i < holds.size(); ++i) {
    if (holds[i].key == holds[i - 1].key) gaps.add_ns(holds[i].acquired_ns - holds[i - 1].released_ns);
  }
  return gaps;
}

// ---------------------------------------------------------------------------
// The contender of workload B: another process, the blocking API, one thread per key.

pid_t start_contender(const Target& target, std::int64_t start_ns, std::int64_t until_ns, const std::string& file) {
  const pid_t child = ::fork();
  if (child == 0) {
    const std::string port = std::to_string(target.port), s = std::to_string(start_ns), u = std::to_string(until_ns);
    ::execl(target.self_path.c_str(), target.self_path.c_str(), "--async-contender", target.host.c_str(), port.c_str(),
            s.c_str(), u.c_str(), file.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return child;
}

// Waits for the contender; its holds, or none if it failed.
std::vector<Hold> finish_contender(pid_t child, const std::string& file, bool& ok) {
  int status = 0;
  ::waitpid(child, &status, 0);
  ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::vector<Hold> holds;
  std::ifstream in(file);
  Hold h;
  while (in >> h.key >> h.acquired_ns >> h.released_ns) holds.push_back(h);
  std::remove(file.c_str());
  return holds;
}

// Holds of one key that overlap, across both processes.
long long overlapping(std::vector<Hold> holds) {
  std::sort(holds.begin(), holds.end(), [](const Hold& a, const Hold& b) {
    return a.key != b.key ? a.key < b.key : a.acquired_ns < b.acquired_ns;
  });
  long long overlaps = 0;
  for (std::size_t i = 1; i < holds.size(); ++i) {
    if (holds[i].key == holds[i - 1].key && holds[i].acquired_ns < holds[i - 1].released_ns) ++overlaps;
  }
  return overlaps;
}

long long within(const std::vector<Hold>& holds, std::int64_t from, std::int64_t to) {
  return std::count_if(holds.begin(), holds.end(),
                       [&](const Hold& h) { return h.released_ns >= from && h.released_ns <= to; });
}

// ---------------------------------------------------------------------------
// Workload C: many coroutines waiting on one key.

std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

std::map<std::string, std::string> thread_names() {  // tid -> comm
  std::map<std::string, std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(entry.path() / "comm");
    std::string name;
    std::getline(comm, name);
    names[entry.path().filename().string()] = name;
  }
  return names;
}

double resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

struct Waiters {
  explicit Waiters(int count) : signals(static_cast<std::size_t>(count)) {}
  std::vector<asio::cancellation_signal> signals;  // one per waiter, emitted on the io thread
  std::vector<std::pair<int, std::uint64_t>> grants;  // (spawn index, owner) in the order of the grants (io thread only)
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  std::atomic<int> cancelled{0};
  std::atomic<bool> stop_heartbeat{false};
  std::atomic<bool> record_lag{false};  // only while all wait and during the drain: not the bench's own spawn and cancel loops
  Samples lag;
  std::string error;  // io thread only
};

asio::awaitable<void> waiter(dlock::RedisLockService& service, const std::string& key, int index, Waiters& w) {
  dlock::LockGuard guard =
      co_await dlock::async_lock(service, key, dlock::LockOptions{.wait = dlock::Millis(600000)}, asio::use_awaitable);
  w.grants.emplace_back(index, guard.owner().value());
  co_await dlock::async_unlock(std::move(guard), asio::use_awaitable);
}

asio::awaitable<void> waiters_heartbeat(Waiters& w) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!w.stop_heartbeat.load()) {
    const Clock::time_point due = Clock::now() + 1ms;
    timer.expires_at(due);
    co_await timer.async_wait(asio::use_awaitable);
    if (w.record_lag.load()) w.lag.add(Clock::now() - due);
  }
}

struct WaiterDone {
  Waiters* w;
  void operator()(std::exception_ptr error) const {
    bool aborted = false;
    if (error) {
      try {
        std::rethrow_exception(error);
      } catch (const asio::system_error& e) {
        aborted = e.code() == asio::error::operation_aborted;
      } catch (...) {
      }
    }
    if (aborted) {
      w->cancelled.fetch_add(1);
    } else if (error) {
      w->failed.fetch_add(1);
      if (w->error.empty()) {
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          w->error = e.what();
        }
      }
    }
    w->done.fetch_add(1);
  }
};

// Spawns the waiters one after another, in index order, on the io thread.
struct SpawnWaiters {
  asio::io_context* io;
  dlock::RedisLockService* service;
  const std::string* key;
  Waiters* w;
  int count;
  void operator()() const {
    for (int i = 0; i < count; ++i) {
      asio::co_spawn(*io, waiter(*service, *key, i, *w),
                     asio::bind_cancellation_slot(w->signals[static_cast<std::size_t>(i)].slot(), WaiterDone{w}));
    }
  }
};

// Cancels every waiter still waiting (cancellation signals are emitted on the io thread).
struct CancelWaiters {
  Waiters* w;
  void operator()() const {
    for (auto& signal : w->signals) signal.emit(asio::cancellation_type::terminal);
  }
};

long long redis_integer(RawConnection& redis, std::initializer_list<std::string> args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  Reply reply = redis.call(static_cast<int>(argv.size()), argv.data(), lens.data());
  return reply->integer;
}

// The owners of the line's members ("<instance>:<owner>:<n>"), oldest first.
std::vector<std::uint64_t> line_owners(RawConnection& redis, const std::string& queue) {
  const char* argv[] = {"ZRANGE", queue.c_str(), "0", "-1"};
  const std::size_t lens[] = {6, queue.size(), 1, 2};
  Reply reply = redis.call(4, argv, lens);
  std::vector<std::uint64_t> owners;
  for (std::size_t i = 0; i < reply->elements; ++i) {
    const std::string member(reply->element[i]->str, reply->element[i]->len);
    const auto first = member.find(':'), second = member.find(':', first + 1);
    owners.push_back(std::stoull(member.substr(first + 1, second - first - 1), nullptr, 16));
  }
  return owners;
}

// Grants that went to a waiter while an older one (by `rank`) was still waiting.
long long out_of_order(const std::vector<std::size_t>& ranks_in_grant_order) {
  std::set<std::size_t> waiting(ranks_in_grant_order.begin(), ranks_in_grant_order.end());
  long long count = 0;
  for (std::size_t rank : ranks_in_grant_order) {
    if (rank != *waiting.begin()) ++count;
    waiting.erase(rank);
  }
  return count;
}

void report_lag(Report& report, const std::string& label, const Samples& lag) {
  report.figure(label + " heartbeat lag p50", lag.percentile_us(500), "us");
  report.figure(label + " heartbeat lag p99", lag.percentile_us(990), "us");
  report.figure(label + " heartbeat lag max", lag.percentile_us(1000), "us");
}

bool run_waiters(Report& report, const Target& target, int count, double idle_seconds,
                 Clock::duration line_up_limit, Clock::duration drain_limit_span) {
  const std::string key = "bench:async:line";
  const std::string queue = "dlock:{" + key + "}:queue";
  dlock::Config config = target.config();
  RawConnection redis(target.host, target.port);
  ServerStats stats(target.host, target.port);

  // The holder: another service instance (its own Redis connections and
  // subscriber; in-process hand-offs never cross services).
  auto holder_service = dlock::make_lock_service(config);
  dlock::LockGuard held = holder_service->lock(key);

  Waiters w(count);
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&io] { io.run(); });
  asio::co_spawn(io, waiters_heartbeat(w), HeartbeatDone{});

  const auto names_before = thread_names();
  const std::size_t threads_before = thread_count();
  auto service = dlock::make_lock_service(config);
  const double rss_before = resident_bytes();
  const Clock::time_point spawned = Clock::now();
  asio::post(io, SpawnWaiters{&io, service.get(), &key, &w, count});

  // Every waiter in the line (Redis' own record of arrival), or the line no longer growing.
  const Clock::time_point give_up = Clock::now() + line_up_limit;
  long long in_line = 0, most_in_line = 0;
  Clock::time_point grew = Clock::now();
  while ((in_line = redis_integer(redis, {"ZCARD", queue})) < count && Clock::now() < give_up &&
         Clock::now() - grew < 3s) {
    if (in_line > most_in_line) {
      most_in_line = in_line;
      grew = Clock::now();
    }
    std::this_thread::sleep_for(2ms);
  }
  most_in_line = std::max(most_in_line, in_line);
  const double line_up_s = std::chrono::duration<double>(Clock::now() - spawned).count();
  const double rss_waiting = resident_bytes();
  const std::size_t threads_waiting = thread_count();
  std::string new_threads;
  for (const auto& [tid, name] : thread_names()) {
    if (!names_before.contains(tid)) new_threads += (new_threads.empty() ? "" : ", ") + name;
  }
  const std::vector<std::uint64_t> line = line_owners(redis, queue);
  w.record_lag = true;

  // The cost of waiting: what the waiters send while nothing is released.
  const ServerSnapshot idle_before = stats.snapshot();
  const double cpu_before = cpu_seconds();
  const Clock::time_point idle_start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(idle_seconds));
  const double idle_s = std::chrono::duration<double>(Clock::now() - idle_start).count();
  const double idle_cpu = cpu_seconds() - cpu_before;
  const ServerSnapshot idle = stats.snapshot().since(idle_before);

  // Released: every waiter takes it in turn and gives it back.
  const Clock::time_point released = Clock::now();
  held.unlock();
  const Clock::time_point drain_limit = Clock::now() + drain_limit_span;
  while (w.done.load() < count && Clock::now() < drain_limit) std::this_thread::sleep_for(1ms);
  const double drain_s = std::chrono::duration<double>(Clock::now() - released).count();
  const int served_in_time = w.done.load();
  w.record_lag = false;
  // Whoever still waits is cancelled (leaves the line, holds nothing), so that the io thread can end.
  asio::post(io, CancelWaiters{&w});
  const Clock::time_point cancel_limit = Clock::now() + 60s;
  while (w.done.load() < count && Clock::now() < cancel_limit) std::this_thread::sleep_for(1ms);
  if (w.done.load() < count) {
    std::fprintf(stderr, "async C: %d waiters neither served nor cancelled; abandoning the process\n",
                 count - w.done.load());
    std::fflush(nullptr);
    std::_Exit(1);
  }
  w.stop_heartbeat = true;
  work.reset();
  io_thread.join();

  // The grants in the line's order (Redis' arrival stamps) and in call order (spawn index).
  std::unordered_map<std::uint64_t, std::size_t> rank;
  for (std::size_t i = 0; i < line.size(); ++i) rank[line[i]] = i;
  std::vector<std::size_t> ranks, indices;
  std::size_t unknown = 0;
  for (const auto& [index, owner] : w.grants) {
    indices.push_back(static_cast<std::size_t>(index));
    auto it = rank.find(owner);
    if (it == rank.end()) {
      ++unknown;
    } else {
      ranks.push_back(it->second);
    }
  }
  const long long line_disorder = out_of_order(ranks);
  const long long call_disorder = out_of_order(indices);
  const std::size_t granted = w.grants.size();

  report.section("async C: " + std::to_string(count) +
                 " coroutines waiting on one key another service holds, then released");
  report.figure("waiters in line at most (Redis ZCARD)", static_cast<double>(most_in_line), "",
                "of " + std::to_string(count) + (most_in_line < count ? "; never all at once" : ""));
  report.figure("  waiting for the line to fill", line_up_s, "s",
                most_in_line < count ? "stopped: not growing for 3 s, or the limit" : "until all were in it");
  report.figure("  in line at the snapshot (ZRANGE)", static_cast<double>(line.size()), "");
  report.figure("threads started by dlock", static_cast<double>(threads_waiting - threads_before), "",
                new_threads.empty() ? "" : "(" + new_threads + ")");
  report.figure("resident memory per waiting coroutine", (rss_waiting - rss_before) / count, "bytes",
                "RSS delta / waiters, frames + dlock's state");
  report.figure("scripts/s sent while all wait, none released", static_cast<double>(idle.calls_of("evalsha")) / idle_s,
                "calls/s", "re-confirming places in line (lock.turn_window)");
  report.figure("  server time in them", 100.0 * static_cast<double>(idle.usec_in({"evalsha"})) / 1e6 / idle_s,
                "% core");
  report.figure("  client CPU while all wait", 100.0 * idle_cpu / idle_s, "% core");
  report.figure("served after the release", static_cast<double>(granted), "",
                "of " + std::to_string(count) + " within " +
                    std::to_string(std::chrono::duration_cast<std::chrono::seconds>(drain_limit_span).count()) +
                    " s; " + std::to_string(w.cancelled.load()) + " cancelled after it, " +
                    std::to_string(w.failed.load()) + " failed" + (w.error.empty() ? "" : ": " + w.error));
  report.figure("  drain time, release to last served (or the limit)", drain_s, "s");
  report.figure("  grants per second", drain_s > 0 ? static_cast<double>(served_in_time) / drain_s : 0, "ops/s");
  report.figure("out-of-order grants, line order", static_cast<double>(line_disorder), "",
                "grants while a waiter older in Redis' line (ZRANGE snapshot) still waited; target 0");
  report.figure("  served waiters missing from the snapshot", static_cast<double>(unknown), "",
                "fell out of the line, or joined it after the snapshot");
  report.figure("out-of-order grants, call order", static_cast<double>(call_disorder), "",
                "grants while a waiter whose async_lock was called earlier still waited");
  report_lag(report, "C (waiting, drain):", w.lag);
  // Correctness: nothing failed. Order and completeness are figures, not checks (timings never fail the bench).
  return w.failed.load() == 0;
}

}  // namespace

int async_contender_main(int argc, char** argv) {
  // --async-contender HOST PORT START_NS UNTIL_NS OUT_FILE
  if (argc != 7) return 64;
  Target target;
  target.host = argv[2];
  target.port = std::stoi(argv[3]);
  const std::int64_t start_ns = std::stoll(argv[4]), until_ns = std::stoll(argv[5]);
  auto service = dlock::make_lock_service(target.config());
  std::vector<std::vector<Hold>> per_key(kKeys);
  std::vector<std::thread> threads;
  std::atomic<bool> failed{false};
  for (int k = 0; k < kKeys; ++k) {
    threads.emplace_back([&, k] {
      const std::string key = key_name(k);
      auto& mine = per_key[static_cast<std::size_t>(k)];
      while (now_ns() < start_ns) std::this_thread::sleep_for(200us);
      try {
        while (now_ns() < until_ns) {
          auto guard = service->lock(key, {.wait = dlock::Millis(60000)});
          Hold h{k, now_ns(), 0};
          std::this_thread::sleep_for(1ms);
          h.released_ns = now_ns();
          guard.unlock();
          mine.push_back(h);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "async contender: %s\n", e.what());
        failed = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  std::ofstream out(argv[6]);
  for (const auto& v : per_key) {
    for (const Hold& h : v) out << h.key << ' ' << h.acquired_ns << ' ' << h.released_ns << '\n';
  }
  return out && !failed ? 0 : 1;
}

bool run_async(Report& report, const Target& target, const Floors& floors) {
  const double seconds = target.async_seconds > 0 ? target.async_seconds : (target.quick ? 1.0 : 5.0);
  const int waiters = target.async_waiters > 0 ? target.async_waiters : (target.quick ? 1000 : 10000);
  bool ok = true;

  std::vector<std::string> keys;
  for (int k = 0; k < kKeys; ++k) keys.push_back(key_name(k));
  auto service = dlock::make_lock_service(target.config());
  auto pool_service = dlock::make_lock_service(target.config());
  asio::thread_pool pool(kPoolThreads);

  auto warm_up = [&] {  // connections and scripts of both services, the I/O threads started
    for (const auto& key : keys) {
      dlock::async_lock(*service, key, {}, asio::use_future).get().unlock();
      pool_service->lock(key).unlock();
    }
  };
  warm_up();

  // ---- A: no other process.
  Run ceiling_a, pool_a, dlock_a;
  {
    CeilingLocker locker;
    run_workload(locker, ceiling_a, Clock::now(), seconds);
  }
  {
    PoolLocker locker{pool_service.get(), keys, &pool, {}};
    run_workload(locker, pool_a, Clock::now(), seconds);
  }
  {
    DlockLocker locker{service.get(), keys};
    run_workload(locker, dlock_a, Clock::now(), seconds);
  }

  // ---- B: the contender process on the same keys, started a second ahead so that it is connected.
  auto contended = [&](auto& locker, Run& run, std::vector<Hold>& theirs) {
    const std::string file = "/tmp/dlock-bench-async-" + std::to_string(::getpid());
    const Clock::time_point start = Clock::now() + 1s;
    const std::int64_t start_ns = ns_of(start);
    const std::int64_t until_ns = start_ns + static_cast<std::int64_t>(seconds * 1e9);
    const pid_t child = start_contender(target, start_ns, until_ns, file);
    run_workload(locker, run, start, seconds);
    theirs = finish_contender(child, file, ok);
  };
  Run pool_b, dlock_b;
  std::vector<Hold> theirs_pool, theirs_dlock;
  {
    PoolLocker locker{pool_service.get(), keys, &pool, {}};
    contended(locker, pool_b, theirs_pool);
  }
  {
    DlockLocker locker{service.get(), keys};
    contended(locker, dlock_b, theirs_dlock);
  }
  pool.join();

  auto rate = [&](const Run& run) { return static_cast<double>(run.sections) / seconds; };
  auto their_rate = [&](const Run& run, const std::vector<Hold>& theirs) {
    return static_cast<double>(within(theirs, ns_of(run.start), ns_of(run.end))) / seconds;
  };
  auto errors = [](const Run& run) { return run.error.empty() ? std::string() : "error: " + run.error; };
  const auto secs = std::to_string(static_cast<int>(seconds * 1000)) + " ms";

  report.section("async A: 200 coroutines on one io thread, 4 keys, 1 ms timer inside, " + secs + " each");
  report.figure("ceiling: per-key async mutex, no Redis", rate(ceiling_a), "cs/s", errors(ceiling_a));
  report.figure("pool workaround: async mutex + blocking lock", rate(pool_a), "cs/s",
                "on a " + std::to_string(kPoolThreads) + "-thread pool " + errors(pool_a));
  report.figure("dlock async_lock / async_unlock", rate(dlock_a), "cs/s", errors(dlock_a));
  report.figure("  dlock async / ceiling", rate(ceiling_a) > 0 ? rate(dlock_a) / rate(ceiling_a) : 0, "x",
                "target >= 0.85");
  report.figure("  dlock async / pool workaround", rate(pool_a) > 0 ? rate(dlock_a) / rate(pool_a) : 0, "x");
  report_lag(report, "ceiling", ceiling_a.lag);
  report_lag(report, "pool", pool_a.lag);
  report_lag(report, "dlock", dlock_a.lag);
  for (const auto& [label, run] : {std::pair<const char*, const Run*>{"ceiling", &ceiling_a}, {"pool", &pool_a},
                                   {"dlock", &dlock_a}}) {
    const Samples gaps = handoff_gaps(run->holds);
    report.figure(std::string(label) + " hand-off gap p50", gaps.percentile_us(500), "us",
                  "release -> next holder of the key runs; " +
                      std::to_string(floors.rtt_p50_us > 0 ? gaps.percentile_us(500) / floors.rtt_p50_us : 0).substr(0, 5) +
                      " RTT");
    report.figure(std::string(label) + " hand-off gap p99", gaps.percentile_us(990), "us");
    report.figure(std::string(label) + " context switches per section",
                  run->holds.empty() ? 0 : static_cast<double>(run->context_switches) / run->holds.size(), "",
                  "every thread of the process");
  }
  const long long overlaps_a = ceiling_a.overlaps + pool_a.overlaps + dlock_a.overlaps;
  report.figure("holders of one key overlapping", static_cast<double>(overlaps_a), "", "target 0");
  ok &= overlaps_a == 0 && ceiling_a.error.empty() && pool_a.error.empty() && dlock_a.error.empty();

  report.section("async B: as A, while another process takes the same keys (blocking, 1 thread per key, 1 ms inside)");
  report.figure("pool workaround", rate(pool_b), "cs/s", errors(pool_b));
  report.figure("  the other process meanwhile", their_rate(pool_b, theirs_pool), "cs/s");
  report.figure("dlock async_lock / async_unlock", rate(dlock_b), "cs/s", errors(dlock_b));
  report.figure("  the other process meanwhile", their_rate(dlock_b, theirs_dlock), "cs/s");
  report.figure("  dlock async / pool workaround", rate(pool_b) > 0 ? rate(dlock_b) / rate(pool_b) : 0, "x",
                "target >= 1.5");
  report.figure("  dlock async / A's ceiling", rate(ceiling_a) > 0 ? rate(dlock_b) / rate(ceiling_a) : 0, "x",
                "the ceiling has no Redis: nothing to contend with");
  report_lag(report, "pool", pool_b.lag);
  report_lag(report, "dlock", dlock_b.lag);
  std::vector<Hold> all_pool = pool_b.holds, all_dlock = dlock_b.holds;
  all_pool.insert(all_pool.end(), theirs_pool.begin(), theirs_pool.end());
  all_dlock.insert(all_dlock.end(), theirs_dlock.begin(), theirs_dlock.end());
  const long long overlaps_b = overlapping(all_pool) + overlapping(all_dlock) + pool_b.overlaps + dlock_b.overlaps;
  report.figure("holders of one key overlapping, both processes", static_cast<double>(overlaps_b), "", "target 0");
  ok &= overlaps_b == 0 && pool_b.error.empty() && dlock_b.error.empty() && !theirs_pool.empty() &&
        !theirs_dlock.empty();

  // ---- C: many waiters on one key.
  ok &= run_waiters(report, target, waiters, target.quick ? 0.5 : 2.0, target.quick ? 5s : 10s,
                    target.quick ? 10s : 15s);
  return ok;
}

}  // namespace bench
