// Waiting: a waiter sleeps on the release notice, not on a poll, and gives
// up at the end of its wait.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <thread>

#include "services.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_CASE("a waiter gets the lock right after the release notice, long before the lease ends", "[waiting]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);  // 30 s watchdog lease: polling on PTTL would wait ~30 s
  auto waiter = dlock::test::make_service(redis);
  auto guard = holder->lock("hot");

  std::atomic<Clock::rep> acquired_at{0};
  auto waiting = std::async(std::launch::async, [&] {
    auto got = waiter->lock("hot", {.wait = 20s});
    acquired_at = Clock::now().time_since_epoch().count();
    return got.fencing_token();
  });
  std::this_thread::sleep_for(300ms);  // let it subscribe and sleep
  auto released_at = Clock::now();
  guard.unlock();
  REQUIRE(waiting.wait_for(15s) == std::future_status::ready);
  CHECK(waiting.get() == guard.fencing_token() + 1);
  auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point(Clock::duration(acquired_at.load())) - released_at);
  // The notice path takes a few ms; the bound is loose for 2 shared cores but
  // far below the 30 s a PTTL-sleeping waiter would need.
  CHECK(gap < 2000ms);
}

TEST_CASE("lock() with a wait throws LockTimeoutError when the wait runs out", "[waiting]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiter = dlock::test::make_service(redis);
  auto guard = holder->lock("busy");
  auto started = Clock::now();
  CHECK_THROWS_AS(waiter->lock("busy", {.wait = 500ms}), dlock::LockTimeoutError);
  auto waited = dlock::test::elapsed_ms(started);
  CHECK(waited >= 500);
  CHECK(waited < 500 + 1500);
  CHECK_THROWS_WITH(waiter->lock("busy", {.wait = 50ms}),
                    Catch::Contains("'busy': still busy after waiting 50 ms"));
}

TEST_CASE("try_lock returns an empty guard when the lock stays busy", "[waiting]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiter = dlock::test::make_service(redis);
  auto guard = holder->lock("busy");
  auto got = waiter->try_lock("busy", {.wait = 100ms});
  CHECK_FALSE(got);
  CHECK(got.key().empty());
  CHECK(guard);
}

TEST_CASE("try_lock without a wait tries once whatever lock.wait_ms, while lock() waits that long", "[waiting]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiter = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.wait = 20s; });
  auto guard = holder->lock("busy");
  CHECK_FALSE(waiter->try_lock("busy"));
  CHECK_FALSE(waiter->try_lock("busy", {.lease = 5s}));  // options without a wait: still once
  auto stats = waiter->stats();
  CHECK(stats.busy == 2);
  CHECK(stats.contended == 0);  // never joined the line
  CHECK(stats.timeouts == 0);
  CHECK(redis.run({"EXISTS", "dlock:{busy}:queue"}) == "0");
  CHECK_THROWS_WITH(waiter->lock("busy", {.wait = 0ms}), Catch::Contains("'busy': busy; tried once"));

  std::thread release([&] {
    std::this_thread::sleep_for(300ms);
    guard.unlock();
  });
  CHECK(waiter->lock("busy"));  // the config's 20 s wait
  release.join();
  CHECK(waiter->stats().contended == 1);
}

TEST_CASE("a waiter notices a crashed holder's expiry though nobody publishes", "[waiting]") {
  dlock::test::RedisServer redis;
  auto waiter = dlock::test::make_service(redis);
  // A holder that vanished: its hash stays until its lease ends, and no release is published.
  redis.run({"HSET", "dlock:{orphan}", "deadbeef:1", "1"});
  redis.run({"PEXPIRE", "dlock:{orphan}", "400"});
  auto started = Clock::now();
  auto guard = waiter->lock("orphan", {.wait = 10s});
  CHECK(guard);
  CHECK(dlock::test::elapsed_ms(started) < 5000);
}

TEST_CASE("several local waiters all get the lock in turn", "[waiting]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto holder = dlock::test::make_service(redis);
  auto guard = holder->lock("queue");
  std::atomic<int> served{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&] {
      auto got = service->lock("queue", {.wait = 20s});
      served.fetch_add(1);
      std::this_thread::sleep_for(20ms);
    });
  }
  std::this_thread::sleep_for(300ms);
  CHECK(served.load() == 0);
  guard.unlock();
  for (auto& t : waiters) t.join();
  CHECK(served.load() == 4);
}
