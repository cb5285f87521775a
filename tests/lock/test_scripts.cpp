// The Lua scripts and the data they leave in Redis.
#include <catch2/catch.hpp>

#include <future>
#include <mutex>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("a lock is a hash of acquisition to hold count with the lease as its PTTL", "[scripts]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("layout", {.lease = 10s});
  CHECK(redis.run({"TYPE", "dlock:{layout}"}) == "hash");
  CHECK(redis.run({"HLEN", "dlock:{layout}"}) == "1");
  CHECK(redis.run({"HVALS", "dlock:{layout}"}) == "1");
  long long pttl = std::stoll(redis.run({"PTTL", "dlock:{layout}"}));
  CHECK(pttl > 5000);
  CHECK(pttl <= 10000);
  // A new fencing counter is seeded from the server's clock in µs, and removed after its retention.
  const std::string time = redis.run({"TIME"});
  const std::uint64_t now_us = std::stoull(time.substr(0, time.find(' '))) * 1000000;
  CHECK(guard.fencing_token() > now_us - 60'000'000);
  CHECK(guard.fencing_token() <= now_us + 1'000'000);
  CHECK(redis.run({"GET", "dlock:{layout}:fence"}) == std::to_string(guard.fencing_token()));
  CHECK(std::stoll(redis.run({"PTTL", "dlock:{layout}:fence"})) > 0);
  // Nothing else: no line, no turn, while nobody waits.
  CHECK(redis.run({"EXISTS", "dlock:{layout}:queue", "dlock:{layout}:alive", "dlock:{layout}:turn"}) == "0");
}

TEST_CASE("SCRIPT FLUSH in the middle changes nothing for callers", "[scripts]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("flushed");
  REQUIRE(redis.run({"SCRIPT", "FLUSH"}) == "OK");
  auto inner = service->lock("flushed");
  CHECK(service->hold_count("flushed") == 2);
  REQUIRE(redis.run({"SCRIPT", "FLUSH"}) == "OK");
  inner.unlock();
  REQUIRE(redis.run({"SCRIPT", "FLUSH"}) == "OK");
  guard.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{flushed}"}) == "0");
}

TEST_CASE("a key of another type at the lock's name is a clear RedisError, and it is left alone", "[scripts]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  redis.run({"SET", "dlock:{mine}", "user data"});
  CHECK_THROWS_AS(service->lock("mine"), dlock::RedisError);
  CHECK_THROWS_WITH(service->lock("mine"), Catch::Contains("'mine'") && Catch::Contains("not a dlock lock"));
  CHECK(redis.run({"GET", "dlock:{mine}"}) == "user data");
  CHECK(redis.run({"EXISTS", "dlock:{mine}:fence"}) == "0");
}

TEST_CASE("a fencing counter that is not a number fails the acquire without a half-made lock", "[scripts]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  redis.run({"SET", "dlock:{f}:fence", "not-a-number"});
  CHECK_THROWS_AS(service->lock("f"), dlock::RedisError);
  CHECK(redis.run({"EXISTS", "dlock:{f}"}) == "0");
}

TEST_CASE("the final release publishes on the lock's channel only when someone waits, naming the next",
          "[scripts]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  // Count messages with a raw subscriber through an executor of its own.
  auto executor = std::make_shared<dlock::HiredisExecutor>(redis.config().redis);
  std::mutex mutex;
  std::vector<std::string> messages;
  auto subscription = executor->subscribe("dlock:{pub}:released", [&](const std::string& message) {
    std::lock_guard lock(mutex);
    messages.push_back(message);
  });
  auto count = [&] {
    std::lock_guard lock(mutex);
    return messages.size();
  };
  {
    auto guard = service->lock("pub");
    auto inner = service->lock("pub");
    inner.unlock();
  }
  std::this_thread::sleep_for(200ms);
  CHECK(count() == 0);  // nobody waited: no notice, no Redis work for it

  auto guard = service->lock("pub");
  auto waiter = std::async(std::launch::async, [&] { return static_cast<bool>(other->lock("pub", {.wait = 5s})); });
  REQUIRE(dlock::test::await_line(redis, "pub", 1));
  const std::string waiting = redis.run({"ZRANGE", "dlock:{pub}:queue", "0", "0"});
  guard.unlock();
  CHECK(waiter.get());
  REQUIRE(dlock::test::eventually([&] { return count() == 1; }, 5000ms));
  std::lock_guard lock(mutex);
  CHECK(messages[0] == waiting);
}

TEST_CASE("keys with NUL bytes, braces and script-like text are binary-safe and inert", "[scripts]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  const std::string binary("a\0b\xff", 4);
  for (const std::string& key : {binary, std::string("}{x}"), std::string("'); redis.call('FLUSHALL') --"),
                                 std::string("*3\r\n$3\r\nDEL\r\n")}) {
    auto guard = service->lock(key);
    CHECK(guard);
    CHECK(guard.key() == key);
    CHECK_FALSE(other->try_lock(key));
    guard.unlock();
    CHECK(other->try_lock(key));
  }
  CHECK(redis.run({"DBSIZE"}) != "0");  // nothing was flushed: the fencing counters are still there
}
