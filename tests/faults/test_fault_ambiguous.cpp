// Ambiguous commands: a call that timed out after it was sent may or may not
// have run in Redis. What dlock does today:
//   - an acquire that times out throws ConnectionError and holds nothing
//     locally; if Redis did run it, the lock it took is renewed by nobody and
//     expires after its lease (it is never held forever), unless the same
//     thread locks the key again first and takes that grant over (its id is
//     remembered: a grant nobody was handed);
//   - a release that times out throws ConnectionError, never reports success;
//     a local waiter it was handing the lock to retries, and adopts the grant
//     if the release ran after all;
//     the lock is gone either way within its lease (the watchdog stopped
//     before the release was sent).
// Redis is made to sit on the command with DEBUG SLEEP, longer than the
// client's command timeout; it runs the queued command when it wakes.
#include <catch2/catch.hpp>

#include <future>
#include <thread>

#include "fault_tools.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

namespace {

auto short_timeouts(std::chrono::milliseconds lease) {
  return [lease](dlock::Config& c) {
    c.redis.command_timeout = 300ms;
    c.lock.watchdog_timeout = lease;
  };
}

}  // namespace

TEST_CASE("an acquire that timed out while Redis slept never leaves a lock held for longer than its lease",
          "[fault][ambiguous]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, short_timeouts(2000ms));

  std::thread sleeper = dlock::test::sleep_redis(redis, "1.2");
  const auto sent = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(service->lock("amb"), dlock::ConnectionError);
  CHECK(dlock::test::elapsed_ms(sent) < 1000);  // the command timeout, not the sleep
  CHECK(service->hold_count("amb") == 0);
  CHECK_FALSE(service->held_by_current_thread("amb"));
  CHECK(service->watched_locks() == 0);
  sleeper.join();

  // Redis ran the acquire when it woke: the lock exists, with a finite lease nobody renews.
  REQUIRE(redis.run({"EXISTS", "dlock:{amb}"}) == "1");
  const long long pttl = std::stoll(redis.run({"PTTL", "dlock:{amb}"}));
  CHECK(pttl > 0);
  CHECK(pttl <= 2000);
  const auto woke = std::chrono::steady_clock::now();
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{amb}"}) == "0"; }, 6000ms));
  CHECK(dlock::test::elapsed_ms(woke) <= 2000 + 1000);
  CHECK(service->hold_count("amb") == 0);

  // And the key is usable again, by anyone, with a clean count.
  auto other = dlock::test::make_service(redis);
  auto guard = other->lock("amb");
  CHECK(guard);
  guard.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{amb}"}) == "0");
}

TEST_CASE("an acquire that timed out but ran leaves no extra hold once the same thread takes the lock again",
          "[fault][ambiguous]") {
  // Counted as a re-entry, the hold the lost reply left would make Redis hold 2 while the thread
  // holds 1, and the lock would outlive its owner's final release by a lease. The thread's next
  // acquisition of the key reuses the failed one's id and adopts that grant instead.
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, short_timeouts(5000ms));

  std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
  CHECK_THROWS_AS(service->lock("amb2"), dlock::ConnectionError);
  sleeper.join();
  REQUIRE(redis.run({"EXISTS", "dlock:{amb2}"}) == "1");  // the timed-out acquire ran

  auto guard = service->lock("amb2");
  CHECK(guard);
  CHECK(service->hold_count("amb2") == 1);
  CHECK(redis.run({"HVALS", "dlock:{amb2}"}) == "1");
  guard.unlock();
  // Released by its only holder: the lock must be free now, not after another lease.
  CHECK(redis.run({"EXISTS", "dlock:{amb2}"}) == "0");
}

TEST_CASE("a release that timed out while Redis slept is reported as a ConnectionError, and the lock ends anyway",
          "[fault][ambiguous]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, short_timeouts(2000ms));
  auto guard = service->lock("rel");
  REQUIRE(guard);

  std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
  CHECK_THROWS_AS(guard.unlock(), dlock::ConnectionError);
  CHECK_FALSE(guard);
  CHECK(service->hold_count("rel") == 0);
  CHECK(service->watched_locks() == 0);  // nobody renews it any more
  CHECK_NOTHROW(guard.unlock());        // idempotent after the failed attempt
  sleeper.join();

  // Whether or not the queued release ran, the lock is gone within its lease.
  const auto woke = std::chrono::steady_clock::now();
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{rel}"}) == "0"; }, 6000ms));
  CHECK(dlock::test::elapsed_ms(woke) <= 2000 + 1000);
  auto again = service->lock("rel");
  CHECK(again);
}

TEST_CASE("a re-entrant acquire that timed out leaves the outer hold working and releasable",
          "[fault][ambiguous]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, short_timeouts(2000ms));
  auto outer = service->lock("nest");

  std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
  CHECK_THROWS_AS(service->lock("nest"), dlock::ConnectionError);
  sleeper.join();
  CHECK(outer);
  CHECK(service->hold_count("nest") == 1);
  outer.unlock();
  // If the timed-out re-entry ran, one hold is left in Redis that nobody renews: it ends
  // within one lease. It is never held forever.
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{nest}"}) == "0"; }, 2000ms + 3000ms));
}

TEST_CASE("a release that timed out while handing the lock to a local waiter leaves that waiter one hold, once",
          "[fault][ambiguous][handoff]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, short_timeouts(2000ms));
  auto guard = service->lock("offer");
  REQUIRE(guard);

  struct Outcome {
    bool got = false;
    int holds = 0;
  };
  auto waiter = std::async(std::launch::async, [&] {
    auto got = service->lock("offer", {.wait = 8s});
    Outcome outcome{static_cast<bool>(got), service->hold_count("offer")};
    got.unlock();
    return outcome;
  });
  REQUIRE(dlock::test::await_line(redis, "offer", 1));  // asleep in line: the release offers it the lock

  std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
  CHECK_THROWS_AS(guard.unlock(), dlock::ConnectionError);
  sleeper.join();
  REQUIRE(waiter.wait_for(10s) == std::future_status::ready);
  const Outcome outcome = waiter.get();

  // Granted by the release that ran late, or after the holder's lease: either
  // way the waiter holds it once, and its one release frees it.
  CHECK(outcome.got);
  CHECK(outcome.holds == 1);
  CHECK(redis.run({"EXISTS", "dlock:{offer}", "dlock:{offer}:queue"}) == "0");
  CHECK(service->stats().timeouts == 0);
}
