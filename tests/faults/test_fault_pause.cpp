// A Redis that stops answering for longer than a lease: the holder must learn
// by its own clock that its lock is gone BEFORE Redis can have expired it, so
// it never believes it holds a lock another client may already have.
//
// How it is observed honestly: the expiry Redis will apply is read as an
// absolute wall-clock time (PEXPIRETIME) at a moment after which no renewal
// can reach Redis any more. The holder's own deadline is read as
// now + guard.remaining(), sampled while Redis is unresponsive; both are on
// this host's clock. The holder's deadline must come first.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "fault_tools.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

namespace {

struct Observation {
  long long local_deadline_wall_ms = std::numeric_limits<long long>::max();  // now + remaining(), earliest seen
  long long lost_seen_wall_ms = -1;                                          // first time lost() was true
};

// Samples the guard until it reports lost() or `limit` passes.
Observation watch_guard(const dlock::LockGuard& guard, std::chrono::milliseconds limit) {
  Observation seen;
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    const auto left = guard.remaining();
    const long long now = dlock::test::wall_ms();
    if (guard.lost()) {
      seen.lost_seen_wall_ms = now;
      break;
    }
    // remaining() is lease-deadline minus now; any delay between the two reads only makes this later.
    if (left > 0ms) seen.local_deadline_wall_ms = std::min(seen.local_deadline_wall_ms, now + left.count());
    std::this_thread::sleep_for(1ms);
  }
  return seen;
}

}  // namespace

TEST_CASE("a holder whose renewals Redis holds back (CLIENT PAUSE) knows it lost the lock before Redis expires it",
          "[fault][pause]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 1500ms; });
  auto other = dlock::test::make_service(redis);
  std::mutex mutex;
  std::vector<std::string> lost_keys;
  service->on_lost([&](const std::string& key) {
    std::lock_guard lock(mutex);
    lost_keys.push_back(key);
  });

  auto guard = service->lock("paused");
  std::this_thread::sleep_for(700ms);  // at least one renewal went through
  REQUIRE(guard);

  // From here on no write (so no renewal script) runs; reads still do.
  REQUIRE(redis.run({"CLIENT", "PAUSE", "5000", "WRITE"}) == "OK");
  const long long redis_expiry_wall_ms = std::stoll(redis.run({"PEXPIRETIME", "dlock:{paused}"}));
  REQUIRE(redis_expiry_wall_ms > 0);

  const Observation seen = watch_guard(guard, 4000ms);
  // Redis still has the key at the moment the holder gives it up (reads are not paused).
  const long long pttl_after_lost = std::stoll(redis.run({"PTTL", "dlock:{paused}"}));
  // Unpause only once Redis itself counts the key expired, so a renewal held back by the
  // pause cannot run first and stretch a lease its holder has already given up.
  const bool expired_in_redis =
      dlock::test::eventually([&] { return redis.run({"PTTL", "dlock:{paused}"}) == "-2"; }, 4000ms);
  const long long expired_seen_wall_ms = dlock::test::wall_ms();
  redis.run({"CLIENT", "UNPAUSE"});

  INFO("redis expiry " << redis_expiry_wall_ms << ", local deadline " << seen.local_deadline_wall_ms
                       << ", lost seen at " << seen.lost_seen_wall_ms);
  REQUIRE(seen.lost_seen_wall_ms > 0);
  CHECK(expired_in_redis);
  CHECK(expired_seen_wall_ms >= redis_expiry_wall_ms);
  CHECK(guard.lost());
  CHECK_FALSE(guard);
  CHECK_THROWS_AS(guard.check(), dlock::LockLostError);
  // The holder's deadline lies before Redis' expiry, by at least the drift margin it keeps
  // (lease/100 + 2 ms = 17 ms, less 2 ms of rounding to whole milliseconds) and by no more than the lease itself.
  CHECK(seen.local_deadline_wall_ms < redis_expiry_wall_ms);
  CHECK(redis_expiry_wall_ms - seen.local_deadline_wall_ms >= 15);
  CHECK(redis_expiry_wall_ms - seen.local_deadline_wall_ms < 1500);
  // lost() flips by the local clock itself, not when some thread gets round to it.
  CHECK(seen.lost_seen_wall_ms - seen.local_deadline_wall_ms < 1000);
  // Only a slow machine (more than the margin between the two reads) would see it gone already.
  WARN("PTTL in Redis right after the holder saw lost(): " << pttl_after_lost << " ms");

  // The watchdog tells the holder too: stop token and on_lost.
  CHECK(dlock::test::eventually([&] { return guard.stop_token().stop_requested(); }, 5000ms));
  CHECK(dlock::test::eventually([&] {
    std::lock_guard lock(mutex);
    return lost_keys == std::vector<std::string>{"paused"};
  }, 5000ms));
  // After the pause the lock is free for others, and the old holder's release cannot touch it.
  auto taken = other->lock("paused", {.wait = 5s});
  CHECK(taken);
  CHECK_THROWS_AS(guard.unlock(), dlock::LockLostError);
  CHECK(redis.run({"EXISTS", "dlock:{paused}"}) == "1");
}

TEST_CASE("a holder whose Redis sleeps (DEBUG SLEEP) past the lease knows it lost the lock before Redis expires it",
          "[fault][pause]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 1200ms; });
  auto guard = service->lock("slept");
  std::this_thread::sleep_for(500ms);
  REQUIRE(guard);

  // The expiry is read in the same breath as the server goes to sleep: nothing runs in between.
  std::vector<std::string> replies;
  std::thread sleeper([&] {
    replies = dlock::test::run_back_to_back(redis, {{"PEXPIRETIME", "dlock:{slept}"}, {"DEBUG", "SLEEP", "2.5"}}, 8000ms);
  });
  std::this_thread::sleep_for(100ms);
  const Observation seen = watch_guard(guard, 4000ms);
  sleeper.join();

  REQUIRE(replies.size() == 2);
  REQUIRE(replies[1] == "OK");
  const long long redis_expiry_wall_ms = std::stoll(replies[0]);
  INFO("redis expiry " << redis_expiry_wall_ms << ", local deadline " << seen.local_deadline_wall_ms);
  REQUIRE(redis_expiry_wall_ms > 0);
  REQUIRE(seen.lost_seen_wall_ms > 0);
  CHECK(seen.local_deadline_wall_ms < redis_expiry_wall_ms);
  CHECK(redis_expiry_wall_ms - seen.local_deadline_wall_ms < 1200);
  // Once awake, Redis has expired it (nobody could renew), and the holder agrees.
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{slept}"}) == "0"; }, 5000ms));
  CHECK(guard.lost());
  CHECK(service->hold_count("slept") == 0);
}

TEST_CASE("a frozen Redis process (SIGSTOP) past the lease: the holder is lost, and afterwards locks work again",
          "[fault][pause]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.lock.watchdog_timeout = 1000ms;
    c.redis.command_timeout = 300ms;
  });
  auto guard = service->lock("frozen");
  redis.freeze();
  const auto frozen_at = std::chrono::steady_clock::now();
  const bool lost = dlock::test::eventually([&] { return guard.lost(); }, 3000ms);
  const auto lost_after = dlock::test::elapsed_ms(frozen_at);
  std::this_thread::sleep_for(300ms);
  redis.thaw();

  CHECK(lost);
  CHECK(lost_after <= 1500);  // by the local clock: one lease after the grant, plus slack
  // The calls that timed out during the freeze left no broken connection behind.
  auto again = service->lock("frozen", {.wait = 5s});
  CHECK(again);
  CHECK(service->hold_count("frozen") == 1);
  again.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{frozen}"}) == "0");
}
