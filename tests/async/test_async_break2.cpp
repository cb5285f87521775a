// A second fresh-eyes attack on the async acquisition path after the timer
// thread / finish_idle / PendingOperations rework (lock/async_acquire.cpp,
// primitives/async_acquire_all.cpp, <dlock/asio.hpp>): what runs on the timer
// thread and on the cancelling thread, completions counted under cancellation
// racing the deadline racing a hand-off, executors whose context goes away.
//
// FAILING in build/ (RelWithDebInfo): the two async_lock_all cases (a key's
// verdict runs the set's release on the timer thread / inside cancel()).
// FAILING under ASan (build-asan) only: 'an io_context destroyed while a try is
// in flight...' (heap-use-after-free, asio.hpp complete() reads the destroyed
// PendingOperations), 'cancelling the earliest timer...' and the strand case
// (heap-use-after-free in IoThreads::run_timers; the strand's own use after
// free, ~strand_impl locking the destroyed strand service, is behind it).
#include <catch2/catch.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <array>
#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "dlock/asio.hpp"
#include "async_outcomes.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

namespace {

using dlock::test::is_aborted;
using dlock::test::what_of;
using dlock::test::Thaw;
using dlock::test::is_timeout;

using Clock = std::chrono::steady_clock;

void long_turns(dlock::Config& c) { c.lock.turn_window = 30s; }

// A command timeout long enough that a round trip blocked on a frozen server is told apart from a prompt answer.
void slow_commands(dlock::Config& c) {
  c.lock.turn_window = 30s;
  c.redis.command_timeout = 6s;
}





long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

}  // namespace

// ---------------------------------------------------------------------------
// async_lock_all: a key's verdict delivered on the timer thread (its deadline)
// or on the cancelling thread (cancel()) runs the set's next step there,
// which releases the keys taken: blocking round trips where none may run.

TEST_CASE("async break2: async_lock_all timing out on its 2nd key does not stall other waits' deadlines on a frozen server",
          "[async][break2][multi][frozen]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis, long_turns);
  auto service = dlock::test::make_service(redis, slow_commands);
  // Held with long leases: the waiters' naps end at their deadlines (no try in flight when the server freezes).
  dlock::LockGuard b = holder_service->lock("set2-b", {.lease = 60s});
  dlock::LockGuard other = holder_service->lock("set2-other", {.lease = 60s});
  const auto started = Clock::now();
  const std::vector<std::string> keys{"set2-a", "set2-b"};
  auto set = dlock::async_lock_all(*service, keys, {.wait = 2s}, asio::use_future);
  auto single = dlock::async_lock(*service, "set2-other", {.wait = 3s}, asio::use_future);
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{set2-b}:queue"}) == "1"; }));
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{set2-other}:queue"}) == "1"; }));
  REQUIRE(redis.run({"EXISTS", "dlock:{set2-a}"}) == "1");  // the set holds its first key
  std::this_thread::sleep_for(300ms);                        // both asleep in line
  REQUIRE(Clock::now() - started < 1500ms);
  Thaw thaw{redis};
  redis.freeze();
  // The single wait is asleep, its deadline 3 s after the start: the timer thread tells it then, server or
  // no server ("a verdict that needs no round trip is delivered at once from the timer thread"). The set's
  // key times out 1 s earlier, on the same timer thread.
  const bool single_on_time = single.wait_until(started + 3s + 2500ms) == std::future_status::ready;
  INFO("the single wait (deadline 3 s) ended " << ms_since(started) << " ms after its start");
  CHECK(single_on_time);
  redis.thaw();
  single.wait_for(30s);
  set.wait_for(30s);
  CHECK_THROWS_AS(single.get(), dlock::LockTimeoutError);
  CHECK_THROWS_AS(set.get(), dlock::LockTimeoutError);
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{set2-a}"}) == "0"; }, 10s));
}

TEST_CASE("async break2: cancelling async_lock_all while it waits for its 2nd key does not block the cancelling thread",
          "[async][break2][multi][frozen][cancel]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis, long_turns);
  auto service = dlock::test::make_service(redis, slow_commands);
  dlock::LockGuard b = holder_service->lock("cset-b", {.lease = 60s});
  asio::io_context io;
  asio::cancellation_signal signal;
  // What the handler heard, read on its own thread: an exception_ptr handed to another thread is released
  // by libstdc++'s uninstrumented code, which TSan takes for a race with the reader.
  std::promise<bool> heard_aborted;
  std::atomic<int> calls{0};
  const std::vector<std::string> keys{"cset-a", "cset-b"};
  dlock::async_lock_all(*service, keys, {.wait = 30s},
                        asio::bind_cancellation_slot(
                            signal.slot(), asio::bind_executor(io, [&](std::exception_ptr error, dlock::MultiLockGuard) {
                              if (calls.fetch_add(1) == 0) heard_aborted.set_value(is_aborted(error));
                            })));
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{cset-b}:queue"}) == "1"; }));
  REQUIRE(redis.run({"EXISTS", "dlock:{cset-a}"}) == "1");
  std::this_thread::sleep_for(300ms);
  Thaw thaw{redis};
  redis.freeze();
  std::promise<long long> emit_took;
  asio::post(io, [&] {
    const auto t0 = Clock::now();
    signal.emit(asio::cancellation_type::terminal);
    emit_took.set_value(ms_since(t0));
  });
  auto took_future = emit_took.get_future();
  REQUIRE(took_future.wait_for(30s) == std::future_status::ready);
  const long long took = took_future.get();
  // The io_context's thread must not wait on Redis (asio.hpp: "never on the caller's executor"): with a
  // 6 s command timeout, a release run inside emit() holds the event loop for seconds.
  INFO("signal.emit() on the io_context's thread took " << took << " ms");
  CHECK(took < 1500);
  redis.thaw();
  auto heard_future = heard_aborted.get_future();
  REQUIRE(heard_future.wait_for(30s) == std::future_status::ready);
  CHECK(heard_future.get());
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{cset-a}"}) == "0"; }, 10s));
  CHECK(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{cset-b}:queue"}) == "0"; }, 10s));
  work.reset();
  runner.join();
  CHECK(calls.load() == 1);
}

// ---------------------------------------------------------------------------
// The io_context destroyed with a wait pending whose handler is bound to a
// strand: the completion's copy of the strand outlives the context.
// (Needs ASan to see the use after free: build-asan.)

TEST_CASE("async break2: an io_context destroyed with a strand-bound wait pending touches nothing of it after",
          "[async][break2][asan]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis, long_turns);
  auto service = dlock::test::make_service(redis, long_turns);
  dlock::LockGuard holder = holder_service->lock("strand-gone", {.lease = 60s});
  std::atomic<int> called{0};
  {
    Thaw thaw{redis};
    asio::io_context io;
    auto strand = asio::make_strand(io);
    dlock::async_lock(*service, "strand-gone", {.wait = 30s},
                      asio::bind_executor(strand, [&](std::exception_ptr, dlock::LockGuard) { called.fetch_add(1); }));
    asio::co_spawn(
        strand,
        [&service]() -> asio::awaitable<void> {
          dlock::LockGuard g = co_await dlock::async_lock(*service, "strand-gone", {.wait = 30s}, asio::use_awaitable);
        },
        asio::detached);
    io.poll();
    REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{strand-gone}:queue"}) == "2"; }));
    std::this_thread::sleep_for(300ms);
    // Leaving the line after the context's shutdown cancelled them waits on the server (up to the command
    // timeout, 1 s): the operations' last references go after the io_context below is destroyed.
    redis.freeze();
  }
  std::this_thread::sleep_for(2500ms);
  redis.thaw();
  CHECK(called.load() == 0);
  CHECK(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{strand-gone}:queue"}) == "0"; }, 10s));
  holder.unlock();
}

TEST_CASE("async break2: an io_context destroyed while a try is in flight is not touched when the try returns",
          "[async][break2][asan]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, long_turns);
  std::atomic<int> called{0};
  {
    Thaw thaw{redis};
    asio::io_context io;
    redis.freeze();
    // The first try of each waits on the frozen server (command timeout 1 s): running, not idle.
    dlock::async_lock(*service, "inflight-gone", {.wait = 30s},
                      asio::bind_executor(io, [&](std::exception_ptr, dlock::LockGuard) { called.fetch_add(1); }));
    std::this_thread::sleep_for(200ms);
  }  // shutdown: the operation is cancelled (a flag: its try is in flight) and its handler destroyed
  // The server answers within the command timeout: the try's grant is given back, the completion told, and
  // every PendingOperations/ContextLife it reaches must still exist. Thawed by `thaw` above.
  std::this_thread::sleep_for(1500ms);
  CHECK(called.load() == 0);
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{inflight-gone}"}) == "0"; }, 5s));
}

// The timer thread waits until its earliest timer's time, read through a
// reference into the timer map; cancelling that timer erases the node it reads
// when it wakes. (Needs ASan to see: build-asan.)
TEST_CASE("async break2: cancelling the earliest timer while the timer thread waits for it",
          "[async][break2][asan]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis, long_turns);
  auto service = dlock::test::make_service(redis, long_turns);
  dlock::LockGuard holder = holder_service->lock("earliest", {.lease = 60s});
  asio::io_context io;
  asio::cancellation_signal signal;
  std::atomic<int> called{0};
  // The only wait: its deadline (20 s) and its nap are the only timers; the timer thread waits for the nap.
  dlock::async_lock(*service, "earliest", {.wait = 20s},
                    asio::bind_cancellation_slot(signal.slot(), asio::bind_executor(io, [&](std::exception_ptr e, dlock::LockGuard) {
                      CHECK(is_aborted(e));
                      called.fetch_add(1);
                    })));
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{earliest}:queue"}) == "1"; }));
  std::this_thread::sleep_for(300ms);
  signal.emit(asio::cancellation_type::terminal);  // both timers erased by id
  io.run();
  // A new timer wakes the timer thread, which then reads the erased node's time.
  CHECK_THROWS_AS(dlock::async_lock(*service, "earliest", {.wait = 300ms}, asio::use_future).get(), dlock::LockTimeoutError);
  CHECK(called.load() == 1);
}

// ---------------------------------------------------------------------------
// Exactly one completion per started operation while a cancellation, the
// deadline and an in-process hand-off race; nobody told "cancelled" or
// "timed out" while Redis has it as the holder; nobody left in line.

namespace {

struct RaceOp {
  std::string key;
  std::atomic<int> calls{0};
  std::exception_ptr error;
  dlock::LockGuard guard;
  std::string hkeys_when_told;  // HKEYS of the lock when a not-had verdict was heard
  std::string holder_fields;
  bool try_form = false;
};

}  // namespace

TEST_CASE("async break2: cancellation racing the deadline racing a hand-off completes each operation once",
          "[async][break2][race]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, long_turns);
  std::mt19937 random(4242);
  constexpr int kRounds = 20;
  constexpr int kPerRound = 6;
  int bad_calls = 0, told_while_held = 0, granted = 0, cancelled = 0, timed_out = 0, other = 0;
  for (int round = 0; round < kRounds; ++round) {
    asio::io_context io;
    std::vector<std::unique_ptr<RaceOp>> ops;
    std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
    std::vector<asio::strand<asio::io_context::executor_type>> strands;
    std::vector<dlock::LockGuard> holders;
    for (int i = 0; i < kPerRound; ++i) {
      auto op = std::make_unique<RaceOp>();
      op->key = "race2-" + std::to_string(round) + "-" + std::to_string(i);
      op->try_form = (i % 2) == 1;
      holders.push_back(service->lock(op->key, {.lease = 30s}));
      op->holder_fields = redis.run({"HKEYS", "dlock:{" + op->key + "}"});
      ops.push_back(std::move(op));
      signals.push_back(std::make_unique<asio::cancellation_signal>());
      strands.push_back(asio::make_strand(io));
    }
    const auto wait = std::chrono::milliseconds(250 + random() % 100);
    for (int i = 0; i < kPerRound; ++i) {
      RaceOp* op = ops[i].get();
      auto handler = asio::bind_cancellation_slot(
          signals[i]->slot(), asio::bind_executor(strands[i], [op, &redis](std::exception_ptr error, dlock::LockGuard g) {
            if (op->calls.fetch_add(1) != 0) return;
            if (!g) op->hkeys_when_told = redis.run({"HKEYS", "dlock:{" + op->key + "}"});
            op->error = error;
            op->guard = std::move(g);
          }));
      if (op->try_form) {
        dlock::async_try_lock(*service, op->key, {.wait = wait}, std::move(handler));
      } else {
        dlock::async_lock(*service, op->key, {.wait = wait}, std::move(handler));
      }
    }
    const auto issued = Clock::now();
    std::vector<std::thread> runners;
    for (int t = 0; t < 3; ++t) runners.emplace_back([&io] { io.run(); });
    // All asleep in line, then: the holder releases (an in-process offer to the sleeping waiter), the
    // cancellation and the deadline, each within a few ms of the deadline.
    for (auto& op : ops) {
      REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{" + op->key + "}:queue"}) == "1"; }));
    }
    REQUIRE(Clock::now() - issued < wait - 40ms);
    std::vector<std::thread> actors;
    for (int i = 0; i < kPerRound; ++i) {
      const auto release_at = issued + wait - 30ms + std::chrono::microseconds(random() % 40000);
      const auto cancel_at = issued + wait - 30ms + std::chrono::microseconds(random() % 40000);
      actors.emplace_back([&, i, release_at] {
        std::this_thread::sleep_until(release_at);
        holders[i].unlock();
      });
      actors.emplace_back([&, i, cancel_at] {
        std::this_thread::sleep_until(cancel_at);
        asio::post(strands[i], [&, i] { signals[i]->emit(asio::cancellation_type::terminal); });
      });
    }
    for (auto& a : actors) a.join();
    // Every operation's work ends once it is settled: run() returns.
    std::atomic<bool> ran_out{false};
    std::thread watchdog([&] {
      if (!dlock::test::eventually([&] { return io.stopped(); }, 20s)) {
        ran_out = true;
        io.stop();
      }
    });
    for (auto& r : runners) r.join();
    watchdog.join();
    CHECK_FALSE(ran_out.load());
    std::this_thread::sleep_for(100ms);
    for (auto& op : ops) {
      if (op->calls.load() != 1) {
        ++bad_calls;
        UNSCOPED_INFO(op->key << ": completed " << op->calls.load() << " times");
      }
      if (op->guard) {
        ++granted;
        op->guard.unlock();
        continue;
      }
      const bool not_had = is_aborted(op->error) || is_timeout(op->error) || (op->try_form && !op->error);
      if (is_aborted(op->error)) ++cancelled;
      else if (not_had) ++timed_out;
      else {
        ++other;
        UNSCOPED_INFO(op->key << ": " << what_of(op->error));
      }
      if (not_had && !op->hkeys_when_told.empty() && op->hkeys_when_told != op->holder_fields) {
        ++told_while_held;
        UNSCOPED_INFO(op->key << ": told not-had while Redis held it for " << op->hkeys_when_told);
      }
    }
    for (auto& op : ops) {
      const std::string hash = "dlock:{" + op->key + "}";
      CHECK(dlock::test::eventually([&] { return redis.run({"ZCARD", hash + ":queue"}) == "0"; }, 5s));
      CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", hash}) == "0"; }, 5s));
    }
  }
  INFO("granted " << granted << ", cancelled " << cancelled << ", timed out " << timed_out << ", other " << other);
  CHECK(bad_calls == 0);
  CHECK(told_while_held == 0);
  CHECK(other == 0);
}

// ---------------------------------------------------------------------------
// use_future and deferred across an io_context run by several threads, with the deadline ending the wait.

TEST_CASE("async break2: use_future and deferred waits time out once and leave the line", "[async][break2]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis, long_turns);
  auto service = dlock::test::make_service(redis, long_turns);
  dlock::LockGuard holder = holder_service->lock("fd2", {.lease = 60s});
  std::vector<std::future<dlock::LockGuard>> futures;
  for (int i = 0; i < 8; ++i) futures.push_back(dlock::async_lock(*service, "fd2", {.wait = 400ms}, asio::use_future));
  asio::io_context io;
  std::atomic<int> deferred_calls{0};
  std::atomic<int> deferred_empty{0};
  for (int i = 0; i < 8; ++i) {
    auto op = dlock::async_try_lock(*service, "fd2", {.wait = 400ms}, asio::experimental::deferred);
    std::move(op)(asio::bind_executor(io, [&](std::exception_ptr error, dlock::LockGuard g) {
      deferred_calls.fetch_add(1);
      if (!error && !g) deferred_empty.fetch_add(1);
    }));
  }
  std::vector<std::thread> runners;
  for (int t = 0; t < 3; ++t) runners.emplace_back([&io] { io.run(); });
  int timeouts = 0;
  for (auto& f : futures) {
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    try {
      (void)f.get();
    } catch (const dlock::LockTimeoutError&) {
      ++timeouts;
    }
  }
  for (auto& r : runners) r.join();  // returns once every operation settled
  CHECK(timeouts == 8);
  CHECK(deferred_calls.load() == 8);
  CHECK(deferred_empty.load() == 8);
  CHECK(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{fd2}:queue"}) == "0"; }, 5s));
}

// ---------------------------------------------------------------------------
// Semaphores and read-write locks asleep in line when the server freezes: their deadline is kept.

TEST_CASE("async break2: async semaphore and write waits time out near their deadline on a frozen server",
          "[async][break2][shared][frozen]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis, long_turns);
  auto service = dlock::test::make_service(redis, long_turns);
  const dlock::Semaphore permits = holder_service->semaphore("fsem", 1);
  dlock::LockGuard taken = permits.acquire(1, {.lease = 60s});
  dlock::LockGuard reader = holder_service->read_lock("frw", {.lease = 60s});
  const dlock::Semaphore mine = service->semaphore("fsem", 1);
  const auto started = Clock::now();
  std::vector<std::future<dlock::LockGuard>> waits;
  for (int i = 0; i < 6; ++i) waits.push_back(dlock::async_acquire(mine, 1, {.wait = 2s}, asio::use_future));
  for (int i = 0; i < 6; ++i) waits.push_back(dlock::async_write_lock(*service, "frw", {.wait = 2s}, asio::use_future));
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{fsem}:semaphore:queue"}) == "6"; }));
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{frw}:rw:queue"}) == "6"; }));
  std::this_thread::sleep_for(200ms);
  REQUIRE(Clock::now() - started < 1500ms);
  Thaw thaw{redis};
  redis.freeze();
  int late = 0;
  for (auto& w : waits) {
    if (w.wait_until(started + 2s + 3s) != std::future_status::ready) ++late;
  }
  INFO(late << " of 12 waits still pending 3 s after their deadline");
  CHECK(late == 0);
  redis.thaw();
  int timeouts = 0;
  for (auto& w : waits) {
    if (w.wait_for(30s) != std::future_status::ready) continue;
    try {
      (void)w.get();
    } catch (const dlock::LockTimeoutError&) {
      ++timeouts;
    } catch (const dlock::Error&) {
    }
  }
  CHECK(timeouts >= 8);
  CHECK(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{fsem}:semaphore:queue"}) == "0"; }, 10s));
  CHECK(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{frw}:rw:queue"}) == "0"; }, 10s));
}

// ---------------------------------------------------------------------------
// async_lock_all cancelled around a restart: its first key's fixed lease runs
// out while it waits for the second, so taking the second starts the set
// again (release, pause, take again); the cancellation lands before, during or
// after that pause.

TEST_CASE("async break2: async_lock_all cancelled around its restart completes once and holds nothing",
          "[async][break2][multi][cancel]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis, long_turns);
  auto service = dlock::test::make_service(redis, long_turns);
  std::mt19937 random(777);
  constexpr int kRounds = 12;
  int aborted = 0, had = 0, bad = 0;
  for (int round = 0; round < kRounds; ++round) {
    const std::string a = "rs-a-" + std::to_string(round);
    const std::string b = "rs-b-" + std::to_string(round);
    dlock::LockGuard holder = holder_service->lock(b, {.lease = 60s});
    asio::io_context io;
    asio::cancellation_signal signal;
    std::atomic<int> calls{0};
    std::exception_ptr error;
    dlock::MultiLockGuard set_guard;
    std::string held_when_told;
    const std::vector<std::string> keys{a, b};
    dlock::async_lock_all(*service, keys, {.wait = 10s, .lease = 300ms},
                          asio::bind_cancellation_slot(
                              signal.slot(), asio::bind_executor(io, [&](std::exception_ptr e, dlock::MultiLockGuard g) {
                                if (calls.fetch_add(1) != 0) return;
                                if (e) held_when_told = redis.run({"HKEYS", "dlock:{" + a + "}"}) + "|" +
                                                        redis.run({"HKEYS", "dlock:{" + b + "}"});
                                error = e;
                                set_guard = std::move(g);
                              })));
    std::thread runner([&] { io.run(); });
    REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{" + b + "}:queue"}) == "1"; }));
    std::this_thread::sleep_for(400ms);  // the first key's lease (300 ms) ran out
    holder.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 25000));
    asio::post(io, [&] { signal.emit(asio::cancellation_type::terminal); });
    std::atomic<bool> ran_out{false};
    std::thread watchdog([&] {
      if (!dlock::test::eventually([&] { return io.stopped(); }, 20s)) {
        ran_out = true;
        io.stop();
      }
    });
    runner.join();
    watchdog.join();
    CHECK_FALSE(ran_out.load());
    CHECK(calls.load() == 1);
    if (is_aborted(error)) {
      ++aborted;
      if (held_when_told != "|") {
        ++bad;
        UNSCOPED_INFO("round " << round << ": cancelled while Redis held " << held_when_told);
      }
    } else if (!error) {
      ++had;
      set_guard.unlock();
    } else {
      ++bad;
      UNSCOPED_INFO("round " << round << ": " << what_of(error));
    }
    for (const std::string& key : keys) {
      CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{" + key + "}"}) == "0"; }, 5s));
      CHECK(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{" + key + "}:queue"}) == "0"; }, 5s));
    }
  }
  INFO("aborted " << aborted << ", had " << had);
  CHECK(bad == 0);
}
