// Direct hand-off: a final release grants the lock straight to a waiter of
// the same instance asleep in line (known alive), sparing it a round trip,
// and passes older waiters of other instances at most three times in a row.
#include <catch2/catch.hpp>

#include <algorithm>
#include <future>
#include <mutex>
#include <thread>

#include "dlock/scripts.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

using dlock::test::await_line;

TEST_CASE("a final release hands the lock to a waiter of the same instance, with its own lease and a new fence",
          "[handoff]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("h");
  const std::uint64_t holder_fence = guard.fencing_token();

  struct Seen {
    std::uint64_t fence = 0;
    long long pttl = 0;
    std::string holders;
  };
  auto waiter = std::async(std::launch::async, [&] {
    auto got = service->lock("h", {.wait = 10s, .lease = 4000ms});
    return Seen{got.fencing_token(), std::stoll(redis.run({"PTTL", "dlock:{h}"})), redis.run({"HLEN", "dlock:{h}"})};
  });
  REQUIRE(await_line(redis, "h", 1));
  guard.unlock();
  REQUIRE(waiter.wait_for(10s) == std::future_status::ready);
  const Seen seen = waiter.get();

  CHECK(service->stats().handed_over == 1);
  CHECK(seen.fence == holder_fence + 1);
  CHECK(seen.holders == "1");
  // The waiter's fixed 4 s lease, not the holder's 30 s watchdog lease.
  CHECK(seen.pttl > 2000);
  CHECK(seen.pttl <= 4000);
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{h}", "dlock:{h}:queue", "dlock:{h}:turn"}));
}

TEST_CASE("local waiters handed the lock in turn each hold it alone, and the watchdog renews them", "[handoff]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 1500ms; });
  auto guard = service->lock("h");
  const std::uint64_t guard_token = guard.fencing_token();
  std::mutex mutex;
  std::vector<std::uint64_t> fences;
  std::atomic<int> inside{0}, overlaps{0}, lost{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&] {
      auto got = service->lock("h", {.wait = 20s});
      if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
      // Longer than the 1.5 s lease: only renewals keep it.
      std::this_thread::sleep_for(1800ms);
      {
        std::lock_guard lock(mutex);
        fences.push_back(got.fencing_token());
      }
      inside.fetch_sub(1);
      if (got.lost()) lost.fetch_add(1);
    });
    REQUIRE(await_line(redis, "h", i + 1));
  }
  guard.unlock();
  for (auto& t : waiters) t.join();
  CHECK(overlaps.load() == 0);
  CHECK(lost.load() == 0);
  const std::uint64_t first = guard_token;
  CHECK(fences == std::vector<std::uint64_t>{first + 1, first + 2, first + 3});
  const dlock::LockStats stats = service->stats();
  CHECK(stats.handed_over == 3);
  CHECK(stats.lost == 0);
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{h}"}));
}

TEST_CASE("an instance hands the lock over within itself at most three times ahead of an older waiter elsewhere",
          "[handoff][fairness]") {
  dlock::test::RedisServer redis;
  auto busy = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  auto guard = busy->lock("h");

  std::mutex mutex;
  std::vector<std::string> order;
  auto take = [&](std::shared_ptr<dlock::RedisLockService> service, std::string name) {
    return std::thread([&, service, name] {
      auto got = service->lock("h", {.wait = 20s});
      std::lock_guard lock(mutex);
      order.push_back(name);
    });
  };
  std::vector<std::thread> threads;
  threads.push_back(take(other, "other"));  // the oldest waiter
  REQUIRE(await_line(redis, "h", 1));
  for (int i = 0; i < 5; ++i) {
    threads.push_back(take(busy, "busy" + std::to_string(i)));
    REQUIRE(await_line(redis, "h", i + 2));
  }
  guard.unlock();
  for (auto& t : threads) t.join();

  REQUIRE(order.size() == 6);
  const auto at = std::find(order.begin(), order.end(), "other") - order.begin();
  // Passed over at most three times, and only by direct hand-offs.
  CHECK(at <= 3);
  CHECK(busy->stats().handed_over >= static_cast<std::uint64_t>(at));
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{h}", "dlock:{h}:queue"}));
}

TEST_CASE("a waiter whose wait runs out while the lock is being handed to it takes the lock", "[handoff]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("h");
  auto waiter = std::async(std::launch::async, [&] {
    const auto started = std::chrono::steady_clock::now();
    auto got = service->try_lock("h", {.wait = 300ms});
    return std::make_pair(static_cast<bool>(got), dlock::test::elapsed_ms(started));
  });
  REQUIRE(await_line(redis, "h", 1, 100ms));
  // The release (and the grant in it) runs only after the waiter's wait has ended.
  REQUIRE(redis.run({"CLIENT", "PAUSE", "700", "ALL"}) == "OK");
  guard.unlock();
  REQUIRE(waiter.wait_for(10s) == std::future_status::ready);
  const auto [got, waited_ms] = waiter.get();
  CHECK(got);
  CHECK(waited_ms >= 300);
  CHECK(service->stats().timeouts == 0);
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{h}", "dlock:{h}:queue"}));
}

TEST_CASE("a waiter that gives up frees a lock handed to it that it never learnt of", "[handoff][scripts]") {
  dlock::test::RedisServer redis;
  // As a release whose reply was lost leaves it: granted to a waiter, another still in line.
  redis.run({"HSET", "dlock:{h}", "gone:1", "1"});
  redis.run({"PEXPIRE", "dlock:{h}", "30000"});
  redis.run({"ZADD", "dlock:{h}:queue", "2", "next:1"});
  redis.run({"ZADD", "dlock:{h}:queue", "1", "gone:1"});  // still ahead in line: the turn must skip it
  const std::string source = dlock::detail::kLeaveScript.source;
  const auto leave = [&](const std::string& key, const std::string& id) {
    const std::string p = "dlock:{" + key + "}";
    return redis.run({"EVAL", source, "5", p, p + ":fence", p + ":queue", p + ":alive", p + ":turn", id, "1000"});
  };
  const std::string alive_until = std::to_string(dlock::test::server_ms(redis) + 60000);
  redis.run({"ZADD", "dlock:{h}:alive", alive_until, "next:1"});
  redis.run({"ZADD", "dlock:{h}:alive", alive_until, "gone:1"});
  CHECK(leave("h", "gone:1") == "1");
  CHECK(redis.run({"EXISTS", "dlock:{h}"}) == "0");
  // The next live waiter is told the free lock is its turn; it keeps its place until it takes it.
  CHECK(redis.run({"GET", "dlock:{h}:turn"}) == "next:1");
  CHECK(redis.run({"ZRANGE", "dlock:{h}:queue", "0", "-1"}) == "next:1");

  // Another acquisition's hold is never touched.
  redis.run({"HSET", "dlock:{k}", "mine:1", "2"});
  CHECK(leave("k", "other:1") == "1");
  CHECK(redis.run({"HGET", "dlock:{k}", "mine:1"}) == "2");
}

TEST_CASE("a release whose fencing counter was overwritten still frees the lock, and hands nothing over",
          "[handoff][scripts]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  // Values the direct grant's INCR refuses: another type, and strings no INCR accepts.
  std::vector<std::string> damage;
  SECTION("a hash") { damage = {"HSET", "dlock:{h}:fence", "not", "a counter"}; }
  SECTION("leading zeros") { damage = {"SET", "dlock:{h}:fence", "007"}; }
  SECTION("the largest counter") { damage = {"SET", "dlock:{h}:fence", "9223372036854775807"}; }
  auto guard = service->lock("h");
  auto waiter = std::async(std::launch::async, [&] {
    try {
      service->lock("h", {.wait = 5s});
      return std::string("acquired");
    } catch (const dlock::RedisError& e) {
      return std::string(e.what());
    }
  });
  REQUIRE(await_line(redis, "h", 1));
  redis.run({"DEL", "dlock:{h}:fence"});
  redis.run(damage);
  CHECK_NOTHROW(guard.unlock());
  CHECK(redis.run({"EXISTS", "dlock:{h}"}) == "0");
  REQUIRE(waiter.wait_for(10s) == std::future_status::ready);
  // The waiter's own acquire then fails on the damaged counter, naming the lock.
  CHECK_THAT(waiter.get(), Catch::Contains("lock 'h'") && Catch::Contains("not a dlock lock"));
  CHECK(service->stats().handed_over == 0);
}

TEST_CASE("a lost-lock hook that blocks does not hold up the waiter a release was handing the lock to",
          "[handoff]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  std::atomic<bool> waiter_done{false};
  std::atomic<bool> hook_saw_waiter_done{false};
  service->on_lost([&](const std::string&) {
    // Blocks until the waiter is through, or gives up after 10 s.
    hook_saw_waiter_done = dlock::test::eventually([&] { return waiter_done.load(); }, 10s);
  });
  auto guard = service->lock("h");
  auto waiter = std::async(std::launch::async, [&] {
    auto got = service->try_lock("h", {.wait = 8s});
    waiter_done = true;
    return static_cast<bool>(got);
  });
  REQUIRE(await_line(redis, "h", 1));
  redis.run({"DEL", "dlock:{h}"});  // the holder's lock is gone: its release finds it lost
  CHECK_THROWS_AS(guard.unlock(), dlock::LockLostError);
  // The hook runs on a thread of its own: it sees the waiter through while it blocks.
  CHECK(dlock::test::eventually([&] { return hook_saw_waiter_done.load(); }, 12s));
  REQUIRE(waiter.wait_for(10s) == std::future_status::ready);
  CHECK(waiter.get());
}
