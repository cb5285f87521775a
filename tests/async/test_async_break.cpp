// Attacks on the async acquisition path (<dlock/asio.hpp>, lock/async_acquire.cpp)
// and the shared acquisition steps (lock/acquisition.cpp): cancellation racing a
// grant or a hand-off, executors that go away or run on several threads, the
// service dropped under pending operations, a frozen server, many waiters on
// one line, blocking and async owners mixed on one service.
#include <catch2/catch.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

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

using Clock = std::chrono::steady_clock;

// A turn window long enough that a waiter held up by a stale turn or a
// waiter left in line would be held up far past any bound below.
void long_turns(dlock::Config& c) { c.lock.turn_window = 30s; }




asio::awaitable<void> wait_for_lock(dlock::RedisLockService& service, std::string key, std::atomic<int>& resumed) {
  dlock::LockGuard guard = co_await dlock::async_lock(service, key, {.wait = 30s}, asio::use_awaitable);
  resumed.fetch_add(1);
  co_await dlock::async_unlock(std::move(guard), asio::use_awaitable);
}

}  // namespace

// ---------------------------------------------------------------------------
// The io_context goes away with a wait pending.

TEST_CASE("async break: an io_context stopped and destroyed with a wait pending leaves no hold behind",
          "[async][break]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);
  auto holder = holder_service->lock("orphaned");
  std::atomic<int> resumed{0};
  {
    asio::io_context io;
    asio::co_spawn(io, wait_for_lock(*service, "orphaned", resumed), asio::detached);
    std::thread runner([&] { io.run(); });
    REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{orphaned}:queue"}) == "1"; }));
    io.stop();
    runner.join();
  }  // the io_context is gone; its coroutine never resumes
  holder.unlock();
  // The abandoned wait must not end up holding the lock for ever (its watchdog renewing it): the next owner
  // gets it within a few seconds.
  dlock::LockGuard next = holder_service->try_lock("orphaned", {.wait = 5s});
  INFO("held in Redis by " << redis.run({"HKEYS", "dlock:{orphaned}"}) << ", "
                           << redis.run({"PTTL", "dlock:{orphaned}"}) << " ms left");
  CHECK(next);
  CHECK(resumed.load() == 0);
  service.reset();  // the abandoned wait's guard, if any, is still renewed by this service's watchdog
}

TEST_CASE("async break: an io_context destroyed after the grant but before the handler ran releases the lock",
          "[async][break]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);
  auto holder = holder_service->lock("granted-late");
  std::atomic<int> resumed{0};
  {
    asio::io_context io;
    asio::co_spawn(io, wait_for_lock(*service, "granted-late", resumed), asio::detached);
    std::thread runner([&] { io.run(); });
    REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{granted-late}:queue"}) == "1"; }));
    io.stop();
    runner.join();
    holder.unlock();
    // Granted to the waiter, whose completion now sits in the stopped io_context's queue.
    REQUIRE(dlock::test::eventually([&] { return redis.run({"HLEN", "dlock:{granted-late}"}) == "1"; }));
    std::this_thread::sleep_for(200ms);
  }  // destroying the queued completion destroys its guard, which releases
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{granted-late}"}));
  CHECK(resumed.load() == 0);
}

// ---------------------------------------------------------------------------
// Cancellation racing a release (a plain one from another service; a hand-off within the same service).

namespace {

struct RaceOutcome {
  int cancelled = 0;
  int granted = 0;
  int bad = 0;  // cancelled but the lock still held in Redis, or any other error
};

void race_cancel_with_release(dlock::test::RedisServer& redis, dlock::RedisLockService& releaser_service,
                              dlock::RedisLockService& waiter_service, const std::string& key, int rounds,
                              RaceOutcome& outcome) {
  std::mt19937 random(12345);
  const std::string hash = "dlock:{" + key + "}";
  for (int round = 0; round < rounds; ++round) {
    dlock::LockGuard holder = releaser_service.lock(key);
    const std::string holder_fields = redis.run({"HKEYS", hash});  // the holder's acquisition id
    asio::io_context io;
    asio::cancellation_signal signal;
    std::promise<std::pair<std::exception_ptr, dlock::LockGuard>> result;
    std::string held_when_cancelled;
    dlock::async_lock(waiter_service, key, {.wait = 30s},
                      asio::bind_cancellation_slot(
                          signal.slot(), asio::bind_executor(io, [&](std::exception_ptr error, dlock::LockGuard guard) {
                            // What Redis has when the canceller hears: the old holder's hold, or nothing.
                            if (is_aborted(error)) held_when_cancelled = redis.run({"HKEYS", hash});
                            result.set_value({error, std::move(guard)});
                          })));
    auto work = asio::make_work_guard(io);
    std::thread runner([&] { io.run(); });
    REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", hash + ":queue"}) == "1"; }));
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 20));  // asleep in line by now, usually
    const auto jitter = std::chrono::microseconds(random() % 3000);
    std::thread releaser([&] {
      std::this_thread::sleep_for(jitter);
      holder.unlock();
    });
    asio::post(io, [&] { signal.emit(asio::cancellation_type::terminal); });
    releaser.join();
    auto [error, guard] = result.get_future().get();
    work.reset();
    runner.join();
    if (is_aborted(error)) {
      ++outcome.cancelled;
      if ((!held_when_cancelled.empty() && held_when_cancelled != holder_fields) || guard) {
        ++outcome.bad;
        UNSCOPED_INFO("round " << round << ": cancelled, yet Redis had " << held_when_cancelled);
      }
    } else if (!error && guard) {
      ++outcome.granted;
      guard.unlock();
    } else {
      ++outcome.bad;
      UNSCOPED_INFO("round " << round << ": " << what_of(error));
    }
    // Nothing left in Redis, and the next owner is not held up by a turn window (30 s).
    CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", hash}) == "0"; }, 5s));
    const auto before = Clock::now();
    dlock::LockGuard next = releaser_service.try_lock(key, {.wait = 5s});
    CHECK(next);
    CHECK(Clock::now() - before < 5s);
    next.unlock();
    CHECK(redis.run({"EXISTS", hash, hash + ":queue", hash + ":alive"}) == "0");
  }
}

}  // namespace

TEST_CASE("async break: cancellation racing a release from another service holds nothing after",
          "[async][break][cancel]") {
  dlock::test::RedisServer redis;
  auto releaser = dlock::test::make_service(redis, long_turns);
  auto waiter = dlock::test::make_service(redis, long_turns);
  RaceOutcome outcome;
  race_cancel_with_release(redis, *releaser, *waiter, "race-remote", 30, outcome);
  INFO("cancelled " << outcome.cancelled << ", granted " << outcome.granted);
  CHECK(outcome.bad == 0);
  CHECK(outcome.cancelled + outcome.granted == 30);
}

TEST_CASE("async break: cancellation racing an in-process hand-off holds nothing after", "[async][break][cancel]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, long_turns);
  RaceOutcome outcome;
  race_cancel_with_release(redis, *service, *service, "race-local", 30, outcome);
  INFO("cancelled " << outcome.cancelled << ", granted " << outcome.granted);
  CHECK(outcome.bad == 0);
  CHECK(outcome.cancelled + outcome.granted == 30);
}

TEST_CASE("async break: a cancellation after completion changes nothing",
          "[async][break][cancel]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, long_turns);
  asio::io_context io;
  asio::cancellation_signal signal;
  std::optional<dlock::LockGuard> got;
  dlock::async_lock(*service, "after", {},
                    asio::bind_cancellation_slot(signal.slot(),
                                                 asio::bind_executor(io, [&](std::exception_ptr error, dlock::LockGuard g) {
                                                   CHECK_FALSE(error);
                                                   got = std::move(g);
                                                 })));
  io.run();
  REQUIRE(got);
  signal.emit(asio::cancellation_type::terminal);  // after completion: nothing to cancel
  CHECK(*got);
  CHECK(redis.run({"EXISTS", "dlock:{after}"}) == "1");
  got->unlock();
  CHECK(redis.run({"EXISTS", "dlock:{after}"}) == "0");
}

// ---------------------------------------------------------------------------
// The service dropped while async operations are pending, and while their guards live.

namespace {

asio::awaitable<void> lock_hold_unlock(std::shared_ptr<dlock::RedisLockService>* service, std::string key,
                                       std::atomic<int>& ok) {
  dlock::RedisLockService& s = **service;
  dlock::LockGuard guard = co_await dlock::async_lock(s, key, {.wait = 30s}, asio::use_awaitable);
  asio::steady_timer timer(co_await asio::this_coro::executor, 300ms);
  co_await timer.async_wait(asio::use_awaitable);  // the service object is gone by now
  if (guard) ok.fetch_add(1);
  co_await dlock::async_unlock(std::move(guard), asio::use_awaitable);
}

}  // namespace

TEST_CASE("async break: the service dropped under pending waits and live async guards", "[async][break]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);
  auto holder = holder_service->lock("dropped");
  std::atomic<int> ok{0};
  asio::io_context io;
  constexpr int kWaiters = 5;
  for (int i = 0; i < kWaiters; ++i) asio::co_spawn(io, lock_hold_unlock(&service, "dropped", ok), asio::detached);
  io.poll();  // every coroutine started its wait
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{dropped}:queue"}) == "5"; }));
  service.reset();  // only the pending operations keep its core now
  holder.unlock();
  io.run();
  CHECK(ok.load() == kWaiters);
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{dropped}"}) == "0"; }));
  CHECK(redis.run({"EXISTS", "dlock:{dropped}:queue"}) == "0");
}

// ---------------------------------------------------------------------------
// Coroutines resumed on other threads: a thread pool, an io_context run by several threads.

namespace {

struct Section {
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> done{0};
};

asio::awaitable<void> hopping_worker(dlock::RedisLockService& service, std::string key, int rounds, Section& section) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (int i = 0; i < rounds; ++i) {
    dlock::LockGuard guard = co_await dlock::async_lock(service, key, {.wait = 60s}, asio::use_awaitable);
    if (section.inside.fetch_add(1) != 0) section.overlaps.fetch_add(1);
    timer.expires_after(1ms);
    co_await timer.async_wait(asio::use_awaitable);  // resumed on any of the pool's threads
    section.inside.fetch_sub(1);
    if (i % 2 == 0) {
      guard.unlock();  // a blocking release on whichever thread it resumed on
    } else {
      co_await dlock::async_unlock(std::move(guard), asio::use_awaitable);
    }
    section.done.fetch_add(1);
  }
}

}  // namespace

TEST_CASE("async break: coroutines on a thread pool mixed with blocking threads exclude each other",
          "[async][break]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  Section section;
  asio::thread_pool pool(4);
  constexpr int kCoroutines = 12;
  constexpr int kRounds = 4;
  for (int i = 0; i < kCoroutines; ++i) asio::co_spawn(pool, hopping_worker(*service, "pool", kRounds, section), asio::detached);
  std::vector<std::thread> blocking;
  for (int t = 0; t < 2; ++t) {
    blocking.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        dlock::LockGuard guard = service->lock("pool", {.wait = 60s});
        if (section.inside.fetch_add(1) != 0) section.overlaps.fetch_add(1);
        std::this_thread::sleep_for(1ms);
        section.inside.fetch_sub(1);
        guard.unlock();
        section.done.fetch_add(1);
      }
    });
  }
  for (auto& t : blocking) t.join();
  pool.join();
  CHECK(section.overlaps.load() == 0);
  CHECK(section.done.load() == (kCoroutines + 2) * kRounds);
  CHECK(redis.run({"EXISTS", "dlock:{pool}", "dlock:{pool}:queue"}) == "0");
}

// ---------------------------------------------------------------------------
// Hand-off from a blocking releaser to an async waiter and back, with a 30 s turn window.

TEST_CASE("async break: blocking to async to blocking hand-offs are prompt", "[async][break]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, long_turns);
  dlock::LockGuard first = service->lock("relay");
  asio::io_context io;
  std::promise<void> async_had;
  std::promise<void> async_release;
  std::exception_ptr async_error;
  dlock::async_lock(*service, "relay", {.wait = 10s},
                    asio::bind_executor(io, [&](std::exception_ptr error, dlock::LockGuard guard) {
                      async_error = error;
                      async_had.set_value();
                      async_release.get_future().wait();
                      if (guard) dlock::async_unlock(std::move(guard), asio::bind_executor(io, [](std::exception_ptr) {}));
                    }));
  std::thread runner([&] { io.run(); });
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{relay}:queue"}) == "1"; }));
  std::promise<bool> blocking_had;
  std::thread blocking([&] {
    dlock::LockGuard third = service->try_lock("relay", {.wait = 10s});
    blocking_had.set_value(static_cast<bool>(third));
  });
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{relay}:queue"}) == "2"; }));
  auto t0 = Clock::now();
  first.unlock();
  async_had.get_future().wait();
  CHECK_FALSE(async_error);
  CHECK(Clock::now() - t0 < 5s);
  t0 = Clock::now();
  async_release.set_value();
  CHECK(blocking_had.get_future().get());
  CHECK(Clock::now() - t0 < 5s);
  blocking.join();
  runner.join();
}

// ---------------------------------------------------------------------------
// Many async waiters on one key, with the fair line: all served, none stuck.

namespace {

asio::awaitable<void> once_in_line(dlock::RedisLockService& service, int index, std::vector<int>& order,
                                   std::mutex& order_mutex, Section& section) {
  dlock::LockGuard guard = co_await dlock::async_lock(service, "crowd", {.wait = 120s}, asio::use_awaitable);
  if (section.inside.fetch_add(1) != 0) section.overlaps.fetch_add(1);
  {
    std::lock_guard lock(order_mutex);
    order.push_back(index);
  }
  section.inside.fetch_sub(1);
  co_await dlock::async_unlock(std::move(guard), asio::use_awaitable);
  section.done.fetch_add(1);
}

}  // namespace

TEST_CASE("async break: hundreds of async waiters on one key are all served", "[async][break][crowd]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);
  dlock::LockGuard holder = holder_service->lock("crowd");
  asio::io_context io;
  Section section;
  std::vector<int> order;
  std::mutex order_mutex;
  constexpr int kWaiters = 200;
  for (int i = 0; i < kWaiters; ++i) asio::co_spawn(io, once_in_line(*service, i, order, order_mutex, section), asio::detached);
  std::thread runner([&] { io.run(); });
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{crowd}:queue"}) == "200"; }, 30s));
  holder.unlock();
  CHECK(dlock::test::eventually([&] { return section.done.load() == kWaiters; }, 90s));
  io.stop();
  runner.join();
  CHECK(section.overlaps.load() == 0);
  CHECK(section.done.load() == kWaiters);
  CHECK(redis.run({"EXISTS", "dlock:{crowd}", "dlock:{crowd}:queue"}) == "0");
}

// ---------------------------------------------------------------------------
// A frozen server: every async wait still ends about when its blocking twin would.

TEST_CASE("async break: waits against a frozen server end near their deadline, not one after another",
          "[async][break][frozen]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);  // command timeout 1 s (the default)
  dlock::LockGuard holder = holder_service->lock("frozen");
  constexpr int kWaiters = 24;
  std::vector<std::future<dlock::LockGuard>> waits;
  for (int i = 0; i < kWaiters; ++i) {
    waits.push_back(dlock::async_lock(*service, "frozen", {.wait = 1500ms}, asio::use_future));
  }
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{frozen}:queue"}) == "24"; }));
  Thaw thaw{redis};
  redis.freeze();
  const auto frozen_at = Clock::now();
  // A blocking caller's wait ends after its wait and at most one command timeout more (plus reconnects): a few
  // seconds. Asked of 24 async waits, each must end within 8 s too, whatever it ends with.
  int late = 0;
  for (auto& wait : waits) {
    if (wait.wait_until(frozen_at + 8s) != std::future_status::ready) ++late;
  }
  const auto all_done_after = Clock::now() - frozen_at;
  INFO("waits still pending 8 s after the freeze: " << late);
  CHECK(late == 0);
  redis.thaw();
  for (auto& wait : waits) {
    if (wait.valid()) wait.wait_for(60s);
  }
  INFO("last ended " << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - frozen_at).count()
                     << " ms after the freeze");
  (void)all_done_after;
}

TEST_CASE("async break: a blocking twin against a frozen server (the bound the async waits are held to)",
          "[async][break][frozen]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);
  dlock::LockGuard holder = holder_service->lock("frozen-blocking");
  constexpr int kWaiters = 24;
  std::vector<std::future<bool>> waits;
  std::atomic<int> started{0};
  for (int i = 0; i < kWaiters; ++i) {
    waits.push_back(std::async(std::launch::async, [&] {
      started.fetch_add(1);
      try {
        return static_cast<bool>(service->lock("frozen-blocking", {.wait = 1500ms}));
      } catch (const dlock::Error&) {
        return false;
      }
    }));
  }
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{frozen-blocking}:queue"}) == "24"; }));
  Thaw thaw{redis};
  redis.freeze();
  const auto frozen_at = Clock::now();
  int late = 0;
  for (auto& wait : waits) {
    if (wait.wait_until(frozen_at + 8s) != std::future_status::ready) ++late;
  }
  CHECK(late == 0);
  redis.thaw();
}

// ---------------------------------------------------------------------------
// Timeouts: the blocking call's error and message.

TEST_CASE("async break: an async timeout says what the blocking one says", "[async][break]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);
  dlock::LockGuard holder = holder_service->lock("said", {.lease = 60s});
  std::string blocking_said, async_said;
  try {
    (void)service->lock("said", {.wait = 300ms});
  } catch (const dlock::LockTimeoutError& e) {
    blocking_said = e.what();
  }
  try {
    (void)dlock::async_lock(*service, "said", {.wait = 300ms}, asio::use_future).get();
  } catch (const dlock::LockTimeoutError& e) {
    async_said = e.what();
  }
  REQUIRE_FALSE(blocking_said.empty());
  REQUIRE_FALSE(async_said.empty());
  // The lease left differs between the two; everything before it is the same.
  CHECK(blocking_said.substr(0, blocking_said.find("lease or turn left")) ==
        async_said.substr(0, async_said.find("lease or turn left")));
  // The async verdict comes first and the line is left just after it, on dlock's I/O thread.
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{said}:queue"}) == "0"; }));
}

// ---------------------------------------------------------------------------
// Semaphores and read-write locks: cancelled waits leave their line, and the rest are served.

namespace {

asio::awaitable<int> permit_or_timeout(const dlock::Semaphore& semaphore, std::chrono::milliseconds after) {
  asio::steady_timer timer(co_await asio::this_coro::executor, after);
  using namespace asio::experimental::awaitable_operators;
  auto which = co_await (dlock::async_acquire(semaphore, 1, {.wait = 30s}, asio::use_awaitable) ||
                         timer.async_wait(asio::use_awaitable));
  co_return static_cast<int>(which.index());
}

asio::awaitable<int> write_or_timeout(dlock::RedisLockService& service, std::chrono::milliseconds after) {
  asio::steady_timer timer(co_await asio::this_coro::executor, after);
  using namespace asio::experimental::awaitable_operators;
  auto which = co_await (dlock::async_write_lock(service, "rw", {.wait = 30s}, asio::use_awaitable) ||
                         timer.async_wait(asio::use_awaitable));
  co_return static_cast<int>(which.index());
}

}  // namespace

TEST_CASE("async break: cancelled semaphore and write waits leave their line and hold nothing",
          "[async][break][shared]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, long_turns);
  auto other = dlock::test::make_service(redis, long_turns);
  const dlock::Semaphore permits = service->semaphore("slots", 1);
  dlock::LockGuard taken = permits.acquire(1);
  dlock::LockGuard reader = other->read_lock("rw");
  asio::io_context io;
  auto sem = asio::co_spawn(io, permit_or_timeout(permits, 300ms), asio::use_future);
  auto rw = asio::co_spawn(io, write_or_timeout(*service, 300ms), asio::use_future);
  io.run();
  CHECK(sem.get() == 1);
  CHECK(rw.get() == 1);
  CHECK(redis.run({"ZCARD", "dlock:{slots}:semaphore:queue"}) == "0");
  CHECK(redis.run({"ZCARD", "dlock:{rw}:rw:queue"}) == "0");
  taken.unlock();
  reader.unlock();
  // Nobody waits in front: both are had at once, not a turn window (30 s) later.
  const auto t0 = Clock::now();
  CHECK(other->semaphore("slots", 1).try_acquire(1, {.wait = 5s}));
  CHECK(other->try_write_lock("rw", {.wait = 5s}));
  CHECK(Clock::now() - t0 < 5s);
}

TEST_CASE("async break: async readers and a blocking writer take turns", "[async][break][shared]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, long_turns);
  dlock::LockGuard writer = service->write_lock("turns");
  auto r1 = dlock::async_read_lock(*service, "turns", {.wait = 10s}, asio::use_future);
  auto r2 = dlock::async_read_lock(*service, "turns", {.wait = 10s}, asio::use_future);
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{turns}:rw:queue"}) == "2"; }));
  const auto t0 = Clock::now();
  writer.unlock();
  dlock::LockGuard a = r1.get();
  dlock::LockGuard b = r2.get();
  CHECK(a);
  CHECK(b);
  CHECK(Clock::now() - t0 < 5s);
  auto w = dlock::async_write_lock(*service, "turns", {.wait = 10s}, asio::use_future);
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{turns}:rw:queue"}) == "1"; }));
  a.unlock();
  b.unlock();
  CHECK(w.get());
}

// ---------------------------------------------------------------------------
// A frozen server and cancellation: a cancelled wait completes without waiting on the server.

TEST_CASE("async break: cancelling waits while the server is frozen completes them promptly",
          "[async][break][frozen][cancel]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);
  dlock::LockGuard holder = holder_service->lock("frozen-cancel");
  asio::io_context io;
  constexpr int kWaiters = 12;
  std::vector<std::unique_ptr<asio::cancellation_signal>> signals;
  std::atomic<int> completed{0};
  for (int i = 0; i < kWaiters; ++i) {
    signals.push_back(std::make_unique<asio::cancellation_signal>());
    dlock::async_lock(*service, "frozen-cancel", {.wait = 60s},
                      asio::bind_cancellation_slot(signals.back()->slot(),
                                                   asio::bind_executor(io, [&](std::exception_ptr, dlock::LockGuard) {
                                                     completed.fetch_add(1);
                                                   })));
  }
  auto work = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{frozen-cancel}:queue"}) == "12"; }));
  Thaw thaw{redis};
  redis.freeze();
  std::this_thread::sleep_for(500ms);  // some waiters are mid-try, blocked on the frozen server
  const auto cancelled_at = Clock::now();
  asio::post(io, [&] {
    for (auto& signal : signals) signal->emit(asio::cancellation_type::terminal);
  });
  // A cancelled wait "leaves the line at once" (asio.hpp): leaving is best effort, and must not hold the
  // cancellation for one command timeout (1 s) per waiter, one after another.
  const bool prompt = dlock::test::eventually([&] { return completed.load() == kWaiters; }, 5s);
  INFO("completed " << completed.load() << " of " << kWaiters << " within 5 s of the cancellation");
  CHECK(prompt);
  redis.thaw();
  dlock::test::eventually([&] { return completed.load() == kWaiters; }, 60s);
  (void)cancelled_at;
  work.reset();
  runner.join();
}

// ---------------------------------------------------------------------------
// A killed server: sleeping async waiters survive its restart and are served.

TEST_CASE("async break: async waiters asleep when the server is killed are served after its restart",
          "[async][break][killed]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  std::vector<std::future<dlock::LockGuard>> waits;
  {
    dlock::LockGuard holder = service->lock("killed", {.lease = 2s});
    for (int i = 0; i < 4; ++i) waits.push_back(dlock::async_lock(*service, "killed", {.wait = 30s}, asio::use_future));
    REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{killed}:queue"}) == "4"; }));
    redis.kill();
    std::this_thread::sleep_for(500ms);
    redis.start();  // an empty server: the lock and its line are gone
    holder.detach();
  }
  // The restart lost the line: whoever tries first after it is served first, so take them as they come.
  int had = 0;
  std::vector<bool> taken(waits.size(), false);
  const auto give_up = std::chrono::steady_clock::now() + 40s;
  while (had < static_cast<int>(waits.size()) && std::chrono::steady_clock::now() < give_up) {
    for (std::size_t i = 0; i < waits.size(); ++i) {
      if (taken[i] || waits[i].wait_for(10ms) != std::future_status::ready) continue;
      taken[i] = true;
      dlock::LockGuard guard = waits[i].get();
      if (guard) ++had;
      guard.unlock();
    }
  }
  CHECK(had == 4);
}
