// RedisLockService::force_unlock(): `dlock unlock --force` through the library.
// The lock is deleted whoever holds it, the oldest waiter is served at once,
// and the holder finds its lock lost at its next renewal.
#include <catch2/catch.hpp>

#include <future>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("force_unlock removes another service's hold and serves the oldest waiter", "[inspection]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 900ms; });
  auto waiter = dlock::test::make_service(redis);
  auto operator_service = dlock::test::make_service(redis);
  auto held = holder->lock("stuck");
  const std::string holder_id = redis.run({"HKEYS", "dlock:{stuck}"});
  std::promise<bool> served;
  std::thread in_line([&] {
    auto guard = waiter->lock("stuck", {.wait = dlock::Millis(20000)});
    served.set_value(bool(guard));
  });
  REQUIRE(dlock::test::await_line(redis, "stuck", 1));

  const dlock::ForcedUnlock done = operator_service->force_unlock("stuck");
  REQUIRE(done.owners.size() == 1);
  CHECK(done.owners.front().owner == holder_id);
  CHECK(done.owners.front().hold_count == 1);
  CHECK(done.removed_holder());
  CHECK(done.majority_answered());
  CHECK_FALSE(done.quorum());

  auto outcome = served.get_future();
  CHECK(outcome.get());  // waited well short of its 20 s: the line was woken, not left to time out
  in_line.join();
  CHECK(dlock::test::eventually([&] { return held.lost(); }));
}

TEST_CASE("force_unlock of a free lock removes nothing", "[inspection]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const dlock::ForcedUnlock done = service->force_unlock("free");
  CHECK(done.owners.empty());
  CHECK_FALSE(done.removed_holder());
  CHECK(redis.run({"EXISTS", "dlock:{free}"}) == "0");
}
