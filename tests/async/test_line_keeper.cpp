// The line keeper (core/src/waiting/line_keeper.cpp) on a real redis-server:
// waiters asleep in line keep their places without waking to renew them, so
// thousands of async waiters on one key stay in line through many turn
// windows and are all served, in line order, once the holder lets go.
#include <catch2/catch.hpp>

#include <asio/use_future.hpp>

#include <future>
#include <string>
#include <vector>

#include "dlock/asio.hpp"
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
  // Served one at a time; each guard is released as soon as it is collected (the next in line then gets it).
  int served = 0;
  std::vector<bool> taken(waits.size(), false);
  const auto give_up = std::chrono::steady_clock::now() + 120s;
  while (served < kWaiters && std::chrono::steady_clock::now() < give_up) {
    bool any = false;
    for (std::size_t i = 0; i < waits.size(); ++i) {
      if (taken[i] || waits[i].wait_for(0s) != std::future_status::ready) continue;
      taken[i] = true;
      any = true;
      if (dlock::LockGuard guard = waits[i].get()) ++served;
    }
    if (!any) std::this_thread::sleep_for(1ms);
  }
  CHECK(served == kWaiters);
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{crowd}", "dlock:{crowd}:queue"}) == "0"; }));
}
