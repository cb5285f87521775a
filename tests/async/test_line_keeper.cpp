// The line keeper (core/src/waiting/line_keeper.cpp) on a real redis-server:
// waiters asleep in line keep their places without waking to renew them, so
// thousands of async waiters on one key stay in line through many turn
// windows and are all served, in line order, once the holder lets go.
#include <catch2/catch.hpp>

#include <asio/use_future.hpp>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "dlock/asio.hpp"
#include "serve_all.hpp"
#include "services.hpp"

using namespace std::chrono_literals;


TEST_CASE("line keeper: thousands of async waiters keep their places through many turn windows", "[async][keeper]") {
  dlock::test::RedisServer redis;
  // A short window: without the keeper, each waiter would try every 200 ms to keep its place.
  const auto short_window = [](dlock::Config& c) { c.lock.turn_window = 600ms; };
  auto holder_service = dlock::test::make_service(redis, short_window);
  auto service = dlock::test::make_service(redis, short_window);
  constexpr int kWaiters = 3000;
  dlock::LockGuard holder = holder_service->lock("crowd");
  std::vector<std::future<dlock::LockGuard>> waits;
  waits.reserve(kWaiters);
  for (int i = 0; i < kWaiters; ++i) waits.push_back(dlock::async_lock(*service, "crowd", {.wait = 60s}, asio::use_future));
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{crowd}:queue"}) == std::to_string(kWaiters); }, 30s));
  // Five windows later every place is still held.
  std::this_thread::sleep_for(3s);
  CHECK(redis.run({"ZCARD", "dlock:{crowd}:queue"}) == std::to_string(kWaiters));
  holder.unlock();
  CHECK(dlock::test::serve_all(waits, 120s) == kWaiters);
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{crowd}", "dlock:{crowd}:queue"}) == "0"; }));
}

TEST_CASE("line keeper: waiters dropped from the line while they slept join it again and are served when it frees",
          "[async][keeper]") {
  dlock::test::RedisServer redis;
  const auto short_window = [](dlock::Config& c) { c.lock.turn_window = 600ms; };
  auto holder_service = dlock::test::make_service(redis, short_window);
  auto service = dlock::test::make_service(redis, short_window);
  constexpr int kWaiters = 50;
  // A long fixed lease: a kept waiter sleeps to the holder's lease, so one that nobody wakes waits that long.
  dlock::LockGuard holder = holder_service->lock("dropped", {.lease = 60s});
  std::vector<std::future<dlock::LockGuard>> waits;
  for (int i = 0; i < kWaiters; ++i) waits.push_back(dlock::async_lock(*service, "dropped", {.wait = 90s}, asio::use_future));
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{dropped}:queue"}) == std::to_string(kWaiters); }, 30s));
  // What a Redis that lost the line (a failover to a replica that had not seen it) leaves: no line at all.
  REQUIRE(redis.run({"DEL", "dlock:{dropped}:queue", "dlock:{dropped}:alive"}) == "2");
  // The keeper finds them gone and wakes them; they join again.
  CHECK(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{dropped}:queue"}) == std::to_string(kWaiters); }, 20s));
  holder.unlock();
  // Served long before the holder's lease would have ended (60 s).
  CHECK(dlock::test::serve_all(waits, 30s) == kWaiters);
}
