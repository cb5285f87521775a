// RedisLockService::stats(): what a dashboard reads.
#include <catch2/catch.hpp>

#include <thread>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("stats count acquisitions, re-entries, releases, contention and timeouts", "[stats]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  {
    auto outer = service->lock("k");
    auto inner = service->lock("k");
    CHECK_FALSE(other->try_lock("k", {.wait = 50ms}));
  }
  // The outer release's reply is read off this thread, after the guard's destructor returned.
  CHECK(dlock::test::eventually([&] { return service->stats().released == 2; }));
  auto stats = service->stats();
  CHECK(stats.acquired == 1);
  CHECK(stats.reentered == 1);
  CHECK(stats.released == 2);
  CHECK(stats.acquire_max >= stats.acquire_p99);
  CHECK(stats.acquire_p99 >= stats.acquire_p50);
  CHECK(stats.acquire_max > 0us);
  auto others = other->stats();
  CHECK(others.contended == 1);
  CHECK(others.timeouts == 1);
  CHECK(others.acquired == 0);
  CHECK_THAT(dlock::format_stats(stats), Catch::Contains("acquired=1 reentered=1 released=2"));
}

TEST_CASE("stats show renewals sent in pipelined rounds and locks lost", "[stats]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 600ms; });
  std::vector<dlock::LockGuard> guards;
  for (int i = 0; i < 100; ++i) guards.push_back(service->lock("k" + std::to_string(i)));
  std::this_thread::sleep_for(1000ms);
  auto stats = service->stats();
  CHECK(stats.renewals_sent >= 100);
  // 100 locks taken within a few ms of each other are renewed together, not one round trip each.
  CHECK(stats.renewal_rounds * 10 <= stats.renewals_sent);
  CHECK(stats.renewals_failed == 0);
  CHECK(stats.lost == 0);

  redis.run({"DEL", "dlock:{k0}"});
  REQUIRE(dlock::test::eventually([&] { return service->stats().lost == 1; }, 3000ms));
  CHECK(guards[0].lost());
}
