// RedisLockService::status(), locked() and lease_left(): what Redis holds for a
// key now, whoever holds it, read as `dlock status` reads it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <future>

#include "services.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("status names the holder of a lock taken in another service", "[inspection]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto observer = dlock::test::make_service(redis);
  auto outer = holder->lock("report:7");
  auto inner = holder->lock("report:7");

  const dlock::LockStatus status = observer->status("report:7");
  REQUIRE(status.held());
  REQUIRE(status.holders.size() == 1);
  const dlock::LockHolder& who = status.holders.front();
  CHECK(who.hold_count == 2);
  CHECK(who.owner == redis.run({"HKEYS", "dlock:{report:7}"}));
  REQUIRE(who.service);
  CHECK(who.service->pid == ::getpid());
  CHECK_FALSE(who.service->host.empty());
  REQUIRE(who.since_unix_ms);
  CHECK(*who.since_unix_ms >= who.service->started_unix_ms);
  REQUIRE(status.lease_left);
  CHECK(*status.lease_left > 0ms);
  CHECK(*status.lease_left <= 30000ms);  // the default watchdog lease
  REQUIRE(status.fencing_token);
  CHECK(static_cast<std::uint64_t>(*status.fencing_token) == outer.fencing_token());
  CHECK(status.waiters == 0);
  CHECK(status.lock_name == "dlock:{report:7}");
  CHECK(observer->locked("report:7"));
  CHECK(observer->lease_left("report:7"));
}

TEST_CASE("status of a free lock is free and keeps the last fencing token", "[inspection]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);

  const dlock::LockStatus never = service->status("never");
  CHECK_FALSE(never.held());
  CHECK_FALSE(never.lease_left);
  CHECK_FALSE(never.fencing_token);
  CHECK_FALSE(service->locked("never"));

  std::uint64_t token = 0;
  {
    auto guard = service->lock("once");
    token = guard.fencing_token();
  }
  // The guard's destructor does not wait for its release's reply.
  REQUIRE(dlock::test::released(redis, {"EXISTS", "dlock:{once}"}));
  const dlock::LockStatus once = service->status("once");
  CHECK_FALSE(once.held());
  CHECK(once.holders.empty());
  CHECK_FALSE(service->lease_left("once"));
  REQUIRE(once.fencing_token);
  CHECK(static_cast<std::uint64_t>(*once.fencing_token) == token);
}

TEST_CASE("status shows a fixed lease running down", "[inspection]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("fixed", {.lease = dlock::Millis(60000)});
  const auto left = service->lease_left("fixed");
  REQUIRE(left);
  CHECK(*left > 0ms);
  CHECK(*left <= 60000ms);
}

TEST_CASE("status counts the waiters in line for a lock", "[inspection]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiter = dlock::test::make_service(redis);
  auto held = holder->lock("busy");
  auto waiting = std::async(std::launch::async, [&] { return bool(waiter->lock("busy", {.wait = dlock::Millis(20000)})); });
  REQUIRE(dlock::test::await_line(redis, "busy", 1, 0ms));

  CHECK(holder->status("busy").waiters == 1);
  held.unlock();
  CHECK(waiting.get());
}

TEST_CASE("status refuses a key lock() would refuse and a name holding another type", "[inspection]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  CHECK_THROWS_AS(service->status(""), dlock::InvalidArgument);
  CHECK_THROWS_AS(service->force_unlock(""), dlock::InvalidArgument);

  redis.run({"SET", "dlock:{taken}", "not a lock"});
  CHECK_THROWS_AS(service->status("taken"), dlock::RedisError);
  CHECK_THROWS_WITH(service->status("taken"), Contains("dlock:{taken}") && Contains("WRONGTYPE") &&
                                                  Contains("lock.key_prefix"));
}
