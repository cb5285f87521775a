// Review B of the distributed semaphore: each case reproduces a defect found
// by trying to break it (or pins a promise that held up). Tag [review].
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "fault_tools.hpp"
#include "forked_holder.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

// --- Defect 1 -------------------------------------------------------------
// An acquire whose reply was lost (the command ran after the client gave up)
// leaves its id as an orphan; the same thread's next acquire of the semaphore
// reuses the id and "adopts" the grant -- whatever number of permits it asks
// now. Redis keeps the old count in the record, so the new guard believes it
// holds 3 permits while Redis counts 1: two more are handed to others.
TEST_CASE("review: an adopted orphan grant counts the permits asked now, not those granted then",
          "[review][semaphore][ambiguous]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.command_timeout = 300ms;
    c.logging.level = "off";
  });
  auto other = dlock::test::make_service(redis);
  auto sem = service->semaphore("orphan", 3);
  sem.acquire(1).unlock();  // loads the script, so that the timed-out call is the acquire itself
  REQUIRE(sem.available() == 3);

  std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
  CHECK_THROWS_AS(sem.acquire(1), dlock::ConnectionError);  // sent, then given up on
  sleeper.join();
  // Redis ran it when it woke: one permit is granted to nobody who knows.
  REQUIRE(dlock::test::eventually([&] { return sem.available() == 2; }, 3000ms));

  // The same thread now asks for all three permits, and is told it has them.
  auto all = sem.acquire(3, {.wait = 2s});
  REQUIRE(all);
  // Then no permit may be free, and nobody else may get one.
  CHECK(sem.available() == 0);
  auto intruder = other->semaphore("orphan", 3).try_acquire(2);
  CHECK_FALSE(intruder);  // fails: 3 + 2 = 5 permits of 3 are held
}

TEST_CASE("review: an adopted orphan grant is refused when more permits are asked than the semaphore has",
          "[review][semaphore][ambiguous]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.command_timeout = 300ms;
    c.logging.level = "off";
  });
  auto sem = service->semaphore("orphan2", 3);
  sem.acquire(1).unlock();
  std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
  CHECK_THROWS_AS(sem.acquire(1), dlock::ConnectionError);
  sleeper.join();
  REQUIRE(dlock::test::eventually([&] { return sem.available() == 2; }, 3000ms));
  // Ten permits of three: refused without the orphan, so with it too.
  CHECK_THROWS_AS(sem.acquire(10), dlock::InvalidArgument);  // fails: a guard "for 10 permits" comes back
}

// --- Defect 2 -------------------------------------------------------------
// A waiter at the head of the line that leaves without being served (its
// wait ran out) publishes nothing, so the waiter behind it -- now the head,
// with permits free -- sleeps until its next timed retry (a third of the turn
// window) instead of being woken.
TEST_CASE("review: a head of the line that times out wakes the waiter behind it", "[review][semaphore][wakeup]") {
  dlock::test::RedisServer redis;
  auto tweak = [](dlock::Config& c) {
    c.lock.turn_window = 15000ms;  // timed retries every 5 s: only a notice wakes sooner
    c.logging.level = "off";
  };
  auto holder_service = dlock::test::make_service(redis, tweak);
  auto large_service = dlock::test::make_service(redis, tweak);
  auto small_service = dlock::test::make_service(redis, tweak);
  auto one = holder_service->semaphore("line", 2).acquire(1);  // one of two permits free
  REQUIRE(one);

  std::atomic<bool> large_timed_out{false};
  std::thread large([&] {
    try {
      auto both = large_service->semaphore("line", 2).acquire(2, {.wait = 1000ms});
    } catch (const dlock::LockTimeoutError&) {
      large_timed_out = true;
    }
  });
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{line}:semaphore:queue"}) == "1"; }));
  std::atomic<bool> small_got{false};
  std::thread small([&] {
    try {
      auto permit = small_service->semaphore("line", 2).acquire(1, {.wait = 10s});
      small_got = bool(permit);
    } catch (const dlock::LockTimeoutError&) {
    }
  });
  large.join();
  CHECK(large_timed_out.load());
  // From now on a permit is free and the small request is the only live
  // waiter. Woken, it has it within a round trip; asleep, only after its
  // timed retry (5 s after it last looked).
  CHECK(dlock::test::eventually([&] { return small_got.load(); }, 2000ms));  // fails: got only at ~5 s
  small.join();
  CHECK(small_got.load());
}

TEST_CASE("review: a head of the line refused after set_permits lowered the count wakes the waiter behind it",
          "[review][semaphore][wakeup]") {
  // Same cause as above, on the path of an error: the large request at the
  // head is refused (more permits than the new count) and leaves the line
  // without a notice. The small waiter, in the service that lowered the count
  // (woken locally at once, so it looks while the large one still heads the
  // line), is left to its timed retry.
  dlock::test::RedisServer redis;
  auto tweak = [](dlock::Config& c) {
    c.lock.turn_window = 15000ms;
    c.logging.level = "off";
  };
  auto service = dlock::test::make_service(redis, tweak);
  auto large_service = dlock::test::make_service(redis, tweak);
  auto sem = service->semaphore("shrink", 3);
  auto one = sem.acquire(1);
  REQUIRE(one);

  std::atomic<bool> large_refused{false};
  std::thread large([&] {
    try {
      auto all = large_service->semaphore("shrink", 3).acquire(3, {.wait = 6s});
    } catch (const dlock::InvalidArgument&) {
      large_refused = true;
    }
  });
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{shrink}:semaphore:queue"}) == "1"; }));
  std::atomic<bool> small_got{false};
  std::thread small([&] {
    try {
      auto permit = sem.acquire(1, {.wait = 10s});
      small_got = bool(permit);
    } catch (const dlock::LockTimeoutError&) {
    }
  });
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{shrink}:semaphore:queue"}) == "2"; }));
  std::this_thread::sleep_for(300ms);  // both asleep in line
  sem.set_permits(2);                  // one held, one free: the large request can never be served
  large.join();
  CHECK(large_refused.load());
  // A permit is free and the small request is the only live waiter.
  CHECK(dlock::test::eventually([&] { return small_got.load(); }, 2000ms));  // fails: got only at ~5 s
  small.join();
  CHECK(small_got.load());
}

// --- Defect 3 -------------------------------------------------------------
// permits() and available() hide a count that is not a count: anything GET
// reads but that is no non-negative integer comes back as -1, which the
// handle replaces with its own count -- while acquire() refuses the same key
// with a RedisError.
TEST_CASE("review: permits() and available() refuse a count that is not a permit count, as acquire does",
          "[review][semaphore][arguments]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto sem = service->semaphore("garbled", 3);
  redis.run({"SET", "dlock:{garbled}:semaphore", "not-a-number"});
  CHECK_THROWS_AS(sem.acquire(), dlock::RedisError);  // holds
  CHECK_THROWS_AS(sem.permits(), dlock::Error);       // fails: answers 3
  CHECK_THROWS_AS(sem.available(), dlock::Error);     // fails: answers 3
  redis.run({"SET", "dlock:{garbled}:semaphore", "-2"});
  CHECK_THROWS_AS(sem.acquire(), dlock::RedisError);  // holds
  CHECK_THROWS_AS(sem.permits(), dlock::Error);       // fails: answers 3
}

// --- Probes that held up ---------------------------------------------------

TEST_CASE("review: never more than the count held, many threads, services, sizes and try_acquire",
          "[review][semaphore][stress]") {
  dlock::test::RedisServer redis;
  std::vector<std::shared_ptr<dlock::RedisLockService>> services;
  for (int i = 0; i < 3; ++i) {
    services.push_back(dlock::test::make_service(redis, [](dlock::Config& c) {
      c.lock.watchdog_timeout = 500ms;  // renewed many times over the run
      c.lock.turn_window = 300ms;
      c.logging.level = "off";
    }));
  }
  constexpr long long kCount = 5;
  std::atomic<long long> inside{0}, highest{0};
  std::atomic<int> served{0}, failures{0};
  auto worker = [&](int t) {
    std::mt19937 rng(t);
    auto sem = services[t % 3]->semaphore("stress", kCount);
    for (int i = 0; i < 25; ++i) {
      const long long n = 1 + rng() % 3;
      try {
        dlock::LockGuard guard = (rng() % 4 == 0) ? sem.try_acquire(n) : sem.acquire(n, {.wait = 15s});
        if (!guard) continue;
        const long long now = inside.fetch_add(n) + n;
        long long seen = highest.load();
        while (now > seen && !highest.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 4));
        inside.fetch_sub(n);
        if (rng() % 5 == 0) {
          std::thread([g = std::move(guard)]() mutable { g.unlock(); }).join();  // released by another thread
        } else {
          guard.unlock();
        }
        served.fetch_add(1);
      } catch (const std::exception& e) {
        failures.fetch_add(1);
        WARN(e.what());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 9; ++t) threads.emplace_back(worker, t);
  for (auto& thread : threads) thread.join();
  CHECK(failures.load() == 0);
  CHECK(highest.load() <= kCount);
  CHECK(served.load() > 100);
  CHECK(services[0]->semaphore("stress").available() == kCount);
  CHECK(redis.run({"SCARD", "dlock:{stress}:semaphore:holders"}) == "0");
  CHECK(redis.run({"EXISTS", "dlock:{stress}:semaphore:queue"}) == "0");
}

TEST_CASE("review: hundreds of holders in one thread are all counted and all given back",
          "[review][semaphore]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 800ms; });
  auto sem = service->semaphore("many", 400);
  std::vector<dlock::LockGuard> guards;
  for (int i = 0; i < 398; ++i) guards.push_back(sem.acquire());
  auto two = sem.acquire(2);
  CHECK(sem.available() == 0);
  CHECK_FALSE(sem.try_acquire());
  std::this_thread::sleep_for(2000ms);  // the watchdog renews 399 records over two leases
  CHECK(sem.available() == 0);
  for (auto& g : guards) CHECK_FALSE(g.lost());
  two.unlock();
  CHECK(sem.available() == 2);
  // Released from other threads.
  std::thread a([&] { for (int i = 0; i < 199; ++i) guards[i].unlock(); });
  std::thread b([&] { for (int i = 199; i < 398; ++i) guards[i].unlock(); });
  a.join();
  b.join();
  CHECK(sem.available() == 400);
  CHECK(redis.run({"SCARD", "dlock:{many}:semaphore:holders"}) == "0");
}

TEST_CASE("review: a retried acquire after a lost reply counts its permits once", "[review][semaphore][ambiguous]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.command_timeout = 300ms;
    c.logging.level = "off";
  });
  auto sem = service->semaphore("retry", 3);
  sem.acquire(1).unlock();
  std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
  auto two = sem.acquire(2, {.wait = 5s});  // the first try times out, runs later; the retry adopts it
  sleeper.join();
  REQUIRE(two);
  CHECK(sem.available() == 1);
  CHECK(redis.run({"SCARD", "dlock:{retry}:semaphore:holders"}) == "1");
  two.unlock();
  CHECK(sem.available() == 3);
  CHECK(redis.run({"KEYS", "dlock:{retry}:semaphore:holders*"}) == "");
}

TEST_CASE("review: CLIENT KILL churn: a release cut off by a killed connection parks its permit for a whole lease",
          "[review][semaphore][fault]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.logging.level = "off"; });
  auto other = dlock::test::make_service(redis, [](dlock::Config& c) { c.logging.level = "off"; });
  auto sem = service->semaphore("killed", 2);
  std::atomic<int> got{0};
  std::atomic<bool> stop{false};
  std::thread killer([&] {
    while (!stop) {
      redis.run({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
      std::this_thread::sleep_for(7ms);
    }
  });
  std::vector<std::thread> threads;
  std::atomic<int> inside{0}, highest{0};
  std::atomic<int> failed_releases{0};
  std::mutex odd_mutex;
  std::vector<std::string> odd;  // errors other than ConnectionError
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto s = (t % 2 ? other : service)->semaphore("killed", 2);
      for (int i = 0; i < 10; ++i) {
        try {
          auto g = s.acquire(1, {.wait = 10s});
          const int now = inside.fetch_add(1) + 1;
          int seen = highest.load();
          while (now > seen && !highest.compare_exchange_weak(seen, now)) {
          }
          std::this_thread::sleep_for(3ms);
          inside.fetch_sub(1);
          got.fetch_add(1);
          try {
            g.unlock();
          } catch (const dlock::ConnectionError&) {
            failed_releases.fetch_add(1);
          }
        } catch (const dlock::ConnectionError&) {
        } catch (const std::exception& e) {
          std::lock_guard guard(odd_mutex);
          odd.push_back(e.what());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  stop = true;
  killer.join();
  INFO("releases that failed with ConnectionError: " << failed_releases.load());
  for (const auto& what : odd) WARN(what);
  // Fails now and then (2 of 15 runs): a release whose connection was killed
  // before Redis read it is not retried, so its permit stays held for the
  // whole lease (30 s), and every waiter times out after 10 s.
  CHECK(odd.empty());
  CHECK(highest.load() <= 2);
  CHECK(got.load() > 0);
  // Releases that failed leave records that expire with their lease (30 s):
  // count what Redis holds against what holders hold (none now).
  INFO("available " << sem.available());
  CHECK(redis.run({"SCARD", "dlock:{killed}:semaphore:holders"}) ==
        std::to_string(2 - sem.available()));
}

namespace {

// A child process (forked before this process starts threads of its own)
// that takes `n` of `count` permits of `name` and holds them until killed (1 s
// lease, renewed). Returns once it holds them or, unless `hold`, once it is
// about to stand in line for them.
pid_t fork_member(const dlock::test::RedisServer& redis, const std::string& name, long long count, long long n,
                  bool hold) {
  return dlock::test::fork_holder(redis, 1000ms,
                                  [&](dlock::RedisLockService& s, const dlock::test::ReadySignal& ready) {
                                    auto sem = s.semaphore(name, count);
                                    if (!hold) ready();
                                    return dlock::test::keep(sem.acquire(n, {.wait = 60s}));
                                  });
}

}  // namespace

TEST_CASE("review: a SIGKILLed holder process gives its permits back within one lease",
          "[review][semaphore][crash]") {
  dlock::test::RedisServer redis;
  pid_t child = fork_member(redis, "crashh", 3, 2, true);
  REQUIRE(child > 0);
  auto service = dlock::test::make_service(redis);
  auto sem = service->semaphore("crashh", 3);
  std::this_thread::sleep_for(2500ms);  // renewed past its 1 s lease
  CHECK(sem.available() == 1);
  CHECK_FALSE(sem.try_acquire(2));
  auto killed = dlock::test::kill_holder(child);
  auto three = sem.acquire(3, {.wait = 10s});
  CHECK(three);
  CHECK(dlock::test::elapsed_ms(killed) < 1000 + 1000);
}

TEST_CASE("review: a SIGKILLed waiting process blocks the line no longer than a turn window",
          "[review][semaphore][crash]") {
  dlock::test::RedisServer redis;
  // The parent's holder must exist before the child waits: a raw record of 2 permits, 4 s lease.
  redis.run({"SET", "dlock:{crashw}:semaphore", "2"});
  redis.run({"HSET", "dlock:{crashw}:semaphore:holders:x", "x", "2"});
  redis.run({"PEXPIRE", "dlock:{crashw}:semaphore:holders:x", "3000"});
  redis.run({"SADD", "dlock:{crashw}:semaphore:holders", "x"});
  pid_t child = fork_member(redis, "crashw", 2, 2, false);
  REQUIRE(child > 0);
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{crashw}:semaphore:queue"}) == "1"; }));
  auto killed = dlock::test::kill_holder(child);
  auto service = dlock::test::make_service(redis);  // turn window 1 s
  auto sem = service->semaphore("crashw", 2);
  // The dead waiter heads the line: a small request waits behind it, then goes.
  auto one = sem.acquire(1, {.wait = 10s});
  CHECK(one);
  INFO("took " << dlock::test::elapsed_ms(killed));
  CHECK(dlock::test::elapsed_ms(killed) >= 2500);  // the record's lease, not the dead waiter
  CHECK(dlock::test::elapsed_ms(killed) < 3000 + 1500);
}

TEST_CASE("review: a frozen Redis past a permit's lease: the holder learns it lost it, nobody overlaps unknowingly",
          "[review][semaphore][fault]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.lock.watchdog_timeout = 600ms;
    c.logging.level = "off";
  });
  auto other = dlock::test::make_service(redis, [](dlock::Config& c) { c.logging.level = "off"; });
  auto sem = service->semaphore("frozen", 1);
  auto permit = sem.acquire();
  REQUIRE(permit);
  redis.freeze();
  std::this_thread::sleep_for(1500ms);
  redis.thaw();
  auto taken = other->semaphore("frozen", 1).acquire(1, {.wait = 5s});
  REQUIRE(taken);
  CHECK(permit.lost());
  CHECK_THROWS_AS(permit.unlock(), dlock::LockLostError);
  CHECK(other->semaphore("frozen").available() == 0);
}
