// Mutual exclusion across threads and service instances, shown with a
// counter that is deliberately not atomic: GET, then SET of the value + 1.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("a non-atomic counter stays exact under 8 threads of 2 service instances", "[mutual-exclusion]") {
  dlock::test::RedisServer redis;
  auto first = dlock::test::make_service(redis);
  auto second = dlock::test::make_service(redis);
  auto executor = std::make_shared<dlock::HiredisExecutor>(redis.config().redis);
  executor->connect();

  constexpr int kThreadsPerService = 8;
  constexpr int kIncrementsPerThread = 150;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::vector<std::thread> threads;
  for (auto* service : {&first, &second}) {
    for (int t = 0; t < kThreadsPerService; ++t) {
      threads.emplace_back([&, service] {
        for (int i = 0; i < kIncrementsPerThread; ++i) {
          auto guard = (*service)->lock("counter", {.wait = 60s});
          if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
          auto value = executor->command({"GET", "counter-value"});
          long long current = value.is_nil() ? 0 : std::stoll(value.str);
          executor->command({"SET", "counter-value", std::to_string(current + 1)});
          inside.fetch_sub(1);
        }
      });
    }
  }
  for (auto& thread : threads) thread.join();

  CHECK(overlaps.load() == 0);
  CHECK(redis.run({"GET", "counter-value"}) == std::to_string(2 * kThreadsPerService * kIncrementsPerThread));
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{counter}"}));
}

TEST_CASE("a second service instance cannot take a held key", "[mutual-exclusion]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);

  auto guard = holder->lock("k");
  REQUIRE(guard);
  CHECK_FALSE(other->try_lock("k"));
  guard.unlock();
  CHECK(other->try_lock("k"));
}

TEST_CASE("different keys do not exclude each other", "[mutual-exclusion]") {
  dlock::test::RedisServer redis;
  auto a = dlock::test::make_service(redis);
  auto b = dlock::test::make_service(redis);
  auto first = a->lock("one");
  auto second = b->try_lock("two");
  CHECK(first);
  CHECK(second);
}
