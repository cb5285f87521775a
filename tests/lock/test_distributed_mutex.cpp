// DistributedMutex: a distributed lock as a standard Lockable, so that the
// standard library's lock helpers work with it across processes.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "services.hpp"

using namespace std::chrono_literals;

// unlock() sends the release without waiting for its reply, as a guard's
// destructor does: the keys' absence is awaited (dlock::test::released).

TEST_CASE("std::scoped_lock and std::unique_lock hold a DistributedMutex for their scope", "[mutex]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  dlock::DistributedMutex stock(service, "stock:42");
  {
    std::scoped_lock hold(stock);
    CHECK(redis.run({"EXISTS", "dlock:{stock:42}"}) == "1");
    CHECK(stock.hold_count() == 1);
    CHECK(stock.fencing_token() == std::stoull(redis.run({"GET", "dlock:{stock:42}:fence"})));
    CHECK_NOTHROW(stock.check());
  }
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{stock:42}"}));
  CHECK(stock.hold_count() == 0);
  CHECK(stock.fencing_token() == 0);
  {
    std::unique_lock hold(stock, std::defer_lock);
    CHECK_FALSE(hold.owns_lock());
    CHECK(hold.try_lock());
    CHECK(redis.run({"EXISTS", "dlock:{stock:42}"}) == "1");
    hold.unlock();
    CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{stock:42}"}));
    CHECK(hold.try_lock_for(100ms));
  }
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{stock:42}"}));
}

TEST_CASE("std::lock takes two DistributedMutexes without deadlock, whatever the order", "[mutex]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.wait = 5s; });
  dlock::DistributedMutex from(service, "account:1");
  dlock::DistributedMutex to(service, "account:2");
  std::atomic<int> transfers{0}, with_both_held{0};
  auto transfer = [&](dlock::DistributedMutex& a, dlock::DistributedMutex& b) {
    try {
      for (int i = 0; i < 10; ++i) {
        std::scoped_lock both(a, b);  // std::lock underneath: lock one, try the other, back off
        // Counted here, checked on the test's thread: Catch's assertions are not thread-safe.
        if (redis.run({"EXISTS", "dlock:{account:1}", "dlock:{account:2}"}) == "2") ++with_both_held;
        ++transfers;
      }
    } catch (const dlock::Error&) {
      // A wait of 5 s ran out: the count below falls short and says so.
    }
  };
  std::thread forward([&] { transfer(from, to); });
  std::thread backward([&] { transfer(to, from); });
  forward.join();
  backward.join();
  CHECK(transfers == 20);
  CHECK(with_both_held == 20);
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{account:1}", "dlock:{account:2}"}));
}

TEST_CASE("a DistributedMutex excludes other processes' holders and is re-entrant per thread", "[mutex]") {
  dlock::test::RedisServer redis;
  auto mine = dlock::test::make_service(redis);
  auto theirs = dlock::test::make_service(redis);  // as another process would be
  dlock::DistributedMutex here(mine, "k");
  dlock::DistributedMutex there(*theirs, "k");

  here.lock();
  here.lock();  // re-entry
  CHECK(here.hold_count() == 2);
  CHECK_FALSE(there.try_lock());
  bool other_thread_got_it = true;
  std::thread([&] { other_thread_got_it = here.try_lock(); }).join();  // another thread of this process
  CHECK_FALSE(other_thread_got_it);
  here.unlock();
  CHECK_FALSE(there.try_lock());  // the outer hold keeps it
  here.unlock();
  CHECK(there.try_lock_for(5s));  // the release is sent; another service's try may still reach Redis first
  there.unlock();
  here.unlock();  // holds none: nothing happens
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{k}"}));
}

TEST_CASE("DistributedMutex::lock waits as the service's lock() does and throws LockTimeoutError at the end",
          "[mutex]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);
  auto guard = holder->lock("busy");
  dlock::DistributedMutex busy(service, "busy", {.wait = 200ms});
  CHECK_THROWS_AS(std::scoped_lock(busy), dlock::LockTimeoutError);
  CHECK(busy.hold_count() == 0);
  CHECK(service->stats().timeouts == 1);
  CHECK_FALSE(busy.try_lock());
  CHECK(service->stats().busy == 1);  // try_lock tries once, whatever lock()'s wait
  std::thread release([&] {
    std::this_thread::sleep_for(200ms);
    guard.unlock();
  });
  dlock::DistributedMutex patient(service, "busy", {.wait = 20s});
  {
    std::scoped_lock hold(patient);
    CHECK(patient.hold_count() == 1);
  }
  release.join();
}

TEST_CASE("a DistributedMutex whose lock was lost says so through check(), and unlock() never throws", "[mutex]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 600ms; });
  dlock::DistributedMutex m(service, "lost");
  m.lock();
  REQUIRE(redis.run({"DEL", "dlock:{lost}"}) == "1");
  REQUIRE(dlock::test::eventually([&] {
    try {
      m.check();
      return false;
    } catch (const dlock::LockLostError&) {
      return true;
    }
  }));
  CHECK_NOTHROW(m.unlock());
  CHECK(m.hold_count() == 0);
}

TEST_CASE("a DistributedMutex needs a service and a key", "[mutex][arguments]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  CHECK_THROWS_AS(dlock::DistributedMutex(service, ""), dlock::InvalidArgument);
  CHECK_THROWS_WITH(dlock::DistributedMutex(std::shared_ptr<dlock::RedisLockService>(), "k"),
                    Catch::Contains("null"));
}
