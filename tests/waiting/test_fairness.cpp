// Fair hand-off: waiters line up in Redis, and each final release hands the
// next turn to the oldest of them, across threads, processes and hosts.
#include <catch2/catch.hpp>

#include <future>
#include <mutex>
#include <thread>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("waiters get the lock in the order they arrived, across service instances", "[fairness]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto guard = holder->lock("k");

  std::mutex mutex;
  std::vector<int> order;
  std::vector<std::future<void>> waiters;
  // One waiter per instance, so nobody has a waiter of its own process to hand the lock to
  // (that bounded preference is tested in test_handoff.cpp).
  for (int i = 0; i < 4; ++i) {
    auto service = dlock::test::make_service(redis);
    waiters.push_back(std::async(std::launch::async, [&, service, i] {
      auto got = service->lock("k", {.wait = 20s});
      std::lock_guard lock(mutex);
      order.push_back(i);
    }));
    // Each waiter is in line before the next one arrives.
    REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{k}:queue"}) == std::to_string(i + 1); }));
  }
  guard.unlock();
  for (auto& w : waiters) REQUIRE(w.wait_for(20s) == std::future_status::ready);
  CHECK(order == std::vector<int>{0, 1, 2, 3});
  CHECK(redis.run({"EXISTS", "dlock:{k}:queue", "dlock:{k}:alive", "dlock:{k}:turn"}) == "0");
}

TEST_CASE("a released lock is kept for the waiter whose turn it is, and a dead waiter costs at most one window",
          "[fairness]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  auto guard = holder->lock("k");
  // A waiter that lined up and then died: last heard from now, so presumed alive for one window (1 s).
  const long long now_ms = dlock::test::server_ms(redis);
  redis.run({"ZADD", "dlock:{k}:queue", "1", "ghost:1"});
  redis.run({"ZADD", "dlock:{k}:alive", std::to_string(now_ms + 1000), "ghost:1"});
  guard.unlock();

  CHECK(redis.run({"GET", "dlock:{k}:turn"}) == "ghost:1");
  CHECK(redis.run({"EXISTS", "dlock:{k}"}) == "0");
  CHECK_FALSE(other->try_lock("k"));  // no barging during the ghost's turn
  auto started = std::chrono::steady_clock::now();
  auto got = other->lock("k", {.wait = 5s});
  CHECK(got);
  // The window is 1 s from the ghost's last sign of life; allow scheduling slack.
  CHECK(dlock::test::elapsed_ms(started) < 2500);
  CHECK(redis.run({"ZCARD", "dlock:{k}:queue"}) == "0");  // the ghost was dropped
}

TEST_CASE("a waiter that gives up leaves the line", "[fairness]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiter = dlock::test::make_service(redis);
  auto guard = holder->lock("k");
  CHECK_FALSE(waiter->try_lock("k", {.wait = 200ms}));
  CHECK(redis.run({"ZCARD", "dlock:{k}:queue"}) == "0");
  guard.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{k}:turn"}) == "0");
  CHECK(waiter->try_lock("k"));
}

TEST_CASE("a try without a wait never joins the line", "[fairness]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  auto guard = holder->lock("k");
  CHECK_FALSE(other->try_lock("k"));
  CHECK(redis.run({"EXISTS", "dlock:{k}:queue"}) == "0");
}

TEST_CASE("a thread that releases and locks again in a loop does not starve a waiting instance", "[fairness]") {
  dlock::test::RedisServer redis;
  auto greedy = dlock::test::make_service(redis);
  auto patient = dlock::test::make_service(redis);
  std::atomic<bool> stop{false};
  std::atomic<int> greedy_count{0};
  std::thread loop([&] {
    while (!stop) {
      auto g = greedy->lock("k", {.wait = 10s});
      greedy_count++;
    }
  });
  REQUIRE(dlock::test::eventually([&] { return greedy_count.load() > 10; }));
  auto started = std::chrono::steady_clock::now();
  auto got = patient->lock("k", {.wait = 10s});
  CHECK(got);
  // Fair hand-off: one turn of the greedy loop at most, not a lottery against a hot thread.
  CHECK(dlock::test::elapsed_ms(started) < 2000);
  got.unlock();
  stop = true;
  loop.join();
}
