// Connections killed by the server (CLIENT KILL): mid-call, while idle in the
// pool, under a holder's renewals, and the subscriber's own connection. The
// next call always works; a pooled connection is never reused broken.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("a lock call whose connection is killed mid-call fails with ConnectionError and the next call works",
          "[fault][connection]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.redis.command_timeout = 4000ms; });

  // Writes (the acquire script) wait while the pause lasts: the call is in flight when its connection dies.
  REQUIRE(redis.run({"CLIENT", "PAUSE", "5000", "WRITE"}) == "OK");
  std::string error;
  long long failed_after_ms = -1;
  std::thread caller([&] {
    const auto start = std::chrono::steady_clock::now();
    try {
      service->lock("mid");
    } catch (const dlock::ConnectionError& e) {
      error = e.what();
    }
    failed_after_ms = dlock::test::elapsed_ms(start);
  });
  std::this_thread::sleep_for(400ms);
  CHECK(std::stoll(redis.run({"CLIENT", "KILL", "TYPE", "normal"})) >= 1);
  caller.join();
  redis.run({"CLIENT", "UNPAUSE"});

  CHECK_THAT(error, Catch::Contains("connection lost"));
  CHECK(failed_after_ms < 3000);  // the kill ended the call, not the 4 s command timeout
  CHECK(service->hold_count("mid") == 0);
  CHECK(redis.run({"EXISTS", "dlock:{mid}"}) == "0");  // the killed call never ran

  auto guard = service->lock("mid");
  CHECK(guard);
  CHECK(service->hold_count("mid") == 1);
  guard.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{mid}"}) == "0");
}

TEST_CASE("connections killed while idle in the pool are never handed out again", "[fault][connection]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.redis.pool_size = 2; });
  std::atomic<int> failures{0};
  std::atomic<int> cycles{0};
  auto work = [&] {
    for (int i = 0; i < 25; ++i) {
      try {
        auto guard = service->lock("idle", {.wait = 5s});
        cycles.fetch_add(1);
      } catch (const dlock::Error&) {
        failures.fetch_add(1);
      }
    }
  };
  for (int round = 0; round < 4; ++round) {
    std::thread a(work), b(work);
    a.join();
    b.join();
    // Every release's reply read first: a destructor does not wait for it, and a connection killed under an
    // unread release would leave the lock to its lease.
    REQUIRE(dlock::test::eventually([&] { return service->stats().released == static_cast<std::uint64_t>(cycles.load()); }));
    // Everything now idle in the pool is killed; the next round must not notice.
    redis.run({"CLIENT", "KILL", "TYPE", "normal"});
  }
  CHECK(failures.load() == 0);
  CHECK(cycles.load() == 4 * 2 * 25);
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{idle}"}));
}

TEST_CASE("repeated CLIENT KILLs under a holder do not cost it its lock", "[fault][connection]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 600ms; });
  std::atomic<int> lost{0};
  service->on_lost([&](const std::string&) { lost.fetch_add(1); });
  auto guard = service->lock("renewed");
  // Kill the pool's connections every 100 ms for four leases.
  for (int i = 0; i < 24; ++i) {
    std::this_thread::sleep_for(100ms);
    redis.run({"CLIENT", "KILL", "TYPE", "normal"});
  }
  CHECK(guard);
  CHECK(lost.load() == 0);
  CHECK(redis.run({"EXISTS", "dlock:{renewed}"}) == "1");
  guard.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{renewed}"}) == "0");
}

TEST_CASE("a killed subscriber connection is replaced and release notices still wake waiters",
          "[fault][connection]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiting = dlock::test::make_service(redis);
  auto held = holder->lock("sub", {.lease = 20s});  // without a notice a waiter would sleep up to 20 s

  bool got = false;
  std::string error;
  std::thread waiter([&] {
    try {
      got = static_cast<bool>(waiting->lock("sub", {.wait = 15s}));
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(400ms);
  CHECK(std::stoll(redis.run({"CLIENT", "KILL", "TYPE", "pubsub"})) >= 1);
  std::this_thread::sleep_for(700ms);  // the subscriber reconnects and subscribes again
  const auto released = std::chrono::steady_clock::now();
  held.unlock();
  waiter.join();
  INFO(error);
  CHECK(got);
  CHECK(dlock::test::elapsed_ms(released) < 3000);
}
