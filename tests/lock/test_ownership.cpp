// Owner-checked release: a hold belongs to its guard, unlock(key) to the
// current thread, and nobody ever releases another owner's lock.
#include <catch2/catch.hpp>

#include <thread>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("unlock(key) by a thread holding nothing throws NotOwnerError and leaves Redis unchanged", "[ownership]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto stranger = dlock::test::make_service(redis);
  auto guard = holder->lock("k");
  const std::string before = redis.run({"HGETALL", "dlock:{k}"});

  CHECK_THROWS_AS(stranger->unlock("k"), dlock::NotOwnerError);
  CHECK_THROWS_WITH(stranger->unlock("k"), Catch::Contains("'k'") && Catch::Contains("holds no hold"));
  // Same service, other thread: not the owner either.
  std::thread([&] { CHECK_THROWS_AS(holder->unlock("k"), dlock::NotOwnerError); }).join();

  CHECK(redis.run({"HGETALL", "dlock:{k}"}) == before);
  CHECK(guard);
}

TEST_CASE("unlock(key) releases the current thread's latest hold and empties its guard", "[ownership]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto outer = service->lock("k");
  auto inner = service->lock("k");
  service->unlock("k");
  CHECK_FALSE(inner);
  CHECK(outer);
  CHECK(service->hold_count("k") == 1);
  service->unlock("k");
  CHECK_FALSE(outer);
  CHECK(redis.run({"EXISTS", "dlock:{k}"}) == "0");
  CHECK_THROWS_AS(service->unlock("k"), dlock::NotOwnerError);
}

TEST_CASE("a guard moved to another thread releases its hold there", "[ownership]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  auto guard = service->lock("async");
  std::thread([g = std::move(guard)]() mutable { g.unlock(); }).join();
  CHECK(redis.run({"EXISTS", "dlock:{async}"}) == "0");
  CHECK(other->try_lock("async"));
}

TEST_CASE("unlocking a guard twice is harmless", "[ownership]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("k");
  guard.unlock();
  CHECK_NOTHROW(guard.unlock());
  CHECK_FALSE(guard);
  CHECK(guard.key() == "k");
  dlock::LockGuard empty;
  CHECK_NOTHROW(empty.unlock());
  CHECK_FALSE(empty);
}

TEST_CASE("a guard whose lock was deleted and taken over throws LockLostError and spares the new owner",
          "[ownership]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto thief = dlock::test::make_service(redis);
  auto guard = service->lock("k");
  redis.run({"DEL", "dlock:{k}"});
  auto taken = thief->lock("k");
  const std::string new_owner = redis.run({"HGETALL", "dlock:{k}"});

  CHECK_THROWS_AS(guard.unlock(), dlock::LockLostError);
  CHECK(guard.lost());
  CHECK(redis.run({"HGETALL", "dlock:{k}"}) == new_owner);
  CHECK(taken);
}

TEST_CASE("a guard whose fixed lease ran out throws LockLostError and spares the next owner", "[ownership]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto next = dlock::test::make_service(redis);
  auto guard = service->lock("k", {.lease = 200ms});
  auto taken = next->lock("k", {.wait = 10s});
  REQUIRE(taken);
  const std::string new_owner = redis.run({"HGETALL", "dlock:{k}"});

  CHECK(guard.lost());
  CHECK_FALSE(guard);
  CHECK_THROWS_AS(guard.unlock(), dlock::LockLostError);
  CHECK(redis.run({"HGETALL", "dlock:{k}"}) == new_owner);
}

TEST_CASE("a detached guard leaves its lock in Redis until the lease ends, unrenewed", "[ownership]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  auto guard = service->lock("job", {.lease = 400ms});
  guard.detach();
  CHECK_FALSE(guard);
  CHECK(service->hold_count("job") == 0);
  CHECK(service->watched_locks() == 0);
  CHECK(redis.run({"EXISTS", "dlock:{job}"}) == "1");
  CHECK_FALSE(other->try_lock("job"));
  CHECK(other->lock("job", {.wait = 5s}));  // once the lease ran out
  CHECK_NOTHROW(guard.unlock());            // nothing left to release
}

TEST_CASE("a guard outliving its service still releases its lock", "[ownership]") {
  dlock::test::RedisServer redis;
  dlock::LockGuard guard;
  {
    auto service = dlock::test::make_service(redis);
    guard = service->lock("k");
  }
  CHECK(guard);
  CHECK(redis.run({"EXISTS", "dlock:{k}"}) == "1");
  guard.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{k}"}) == "0");
}
