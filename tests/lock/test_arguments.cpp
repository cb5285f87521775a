// Bad arguments get an InvalidArgument naming the value and what to do.
#include <catch2/catch.hpp>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("an empty key is rejected", "[arguments]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  CHECK_THROWS_AS(service->lock(""), dlock::InvalidArgument);
  CHECK_THROWS_WITH(service->try_lock(""), Catch::Contains("empty"));
  CHECK(redis.run({"EXISTS", "dlock:{}", "dlock:{}:fence", "dlock:{}:queue"}) == "0");
  CHECK(redis.run({"DBSIZE"}) == "1");  // the service's own registry entry, nothing else
}

TEST_CASE("a key longer than lock.max_key_bytes is rejected", "[arguments]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.max_key_bytes = 16; });
  CHECK_NOTHROW(service->lock(std::string(16, 'k')));
  CHECK_THROWS_WITH(service->lock(std::string(17, 'k')),
                    Catch::Contains("17 bytes") && Catch::Contains("lock.max_key_bytes (16)"));
}

TEST_CASE("a lease of zero or less is rejected", "[arguments]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  CHECK_THROWS_AS(service->lock("k", {.lease = 0ms}), dlock::InvalidArgument);
  CHECK_THROWS_WITH(service->lock("k", {.lease = -5ms}), Catch::Contains("-5 ms"));
  CHECK(redis.run({"EXISTS", "dlock:{k}"}) == "0");
}

TEST_CASE("a negative wait is rejected", "[arguments]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  CHECK_THROWS_WITH(service->lock("k", {.wait = -1ms}), Catch::Contains("-1 ms") && Catch::Contains("negative"));
}

TEST_CASE("a service needs an executor and a usable lock config", "[arguments]") {
  dlock::test::RedisServer redis;
  CHECK_THROWS_AS(dlock::RedisLockService(nullptr, dlock::LockConfig{}), dlock::InvalidArgument);
  auto executor = std::make_shared<dlock::HiredisExecutor>(redis.config().redis);
  dlock::LockConfig bad;
  bad.watchdog_timeout = 0ms;
  CHECK_THROWS_WITH(dlock::RedisLockService(executor, bad), Catch::Contains("lock.watchdog_timeout_ms"));
  CHECK_THROWS_AS(dlock::LockAware(nullptr), dlock::InvalidArgument);
}
