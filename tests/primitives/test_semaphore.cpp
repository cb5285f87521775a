// Semaphores: at most `permits` held at once across services, permits of a
// dead holder back after their lease, fair order (a large request is not
// starved), the count changed at run time without losing holders, and bad
// input refused with a clear error.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("a semaphore lets at most its permits in, across services and threads", "[semaphore]") {
  dlock::test::RedisServer redis;
  auto first = dlock::test::make_service(redis);
  auto second = dlock::test::make_service(redis);
  std::atomic<int> inside{0}, highest{0}, done{0};
  auto worker = [&](std::shared_ptr<dlock::RedisLockService> service) {
    auto payments = service->semaphore("payments", 3);
    for (int i = 0; i < 15; ++i) {
      auto permit = payments.acquire(1, {.wait = 20s});
      const int now = inside.fetch_add(1) + 1;
      int seen = highest.load();
      while (now > seen && !highest.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(2ms);
      inside.fetch_sub(1);
      done.fetch_add(1);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) threads.emplace_back(worker, t % 2 ? first : second);
  for (auto& thread : threads) thread.join();
  CHECK(done.load() == 120);
  CHECK(highest.load() <= 3);
  CHECK(highest.load() >= 2);  // the permits were used side by side, not one at a time
  // `second`'s last releases may still be on their way (a guard's destructor does not wait for the reply).
  CHECK(dlock::test::eventually([&] { return first->semaphore("payments").available() == 3; }));
}

TEST_CASE("a semaphore's guard holds n permits and gives them back on release", "[semaphore]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto sem = service->semaphore("pool", 5);
  CHECK(sem.available() == 5);
  CHECK(sem.permits() == 5);
  auto three = sem.acquire(3);
  REQUIRE(three);
  CHECK(three.key() == "pool");
  CHECK(sem.available() == 2);
  auto two = sem.try_acquire(2);
  CHECK(two);
  CHECK(sem.available() == 0);
  CHECK_FALSE(sem.try_acquire());
  CHECK_THROWS_AS(sem.acquire(1, {.wait = 100ms}), dlock::LockTimeoutError);
  three.unlock();
  CHECK(sem.available() == 3);
  two = {};
  CHECK(sem.available() == 5);
  CHECK(redis.run({"EXISTS", "dlock:{pool}:semaphore:holders"}) == "0");
}

TEST_CASE("permits of a holder that stopped renewing come back after their lease", "[semaphore]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  auto sem = service->semaphore("jobs", 2);
  auto held = sem.acquire(2, {.lease = 600ms});
  held.detach();  // as a crashed holder: nobody renews or releases
  auto start = std::chrono::steady_clock::now();
  auto permit = other->semaphore("jobs", 2).acquire(2, {.wait = 5s});
  CHECK(permit);
  CHECK(dlock::test::elapsed_ms(start) >= 400);
}

TEST_CASE("a large request at the head of the line is not passed by smaller ones", "[semaphore][fairness]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto sem = service->semaphore("wide", 4);
  auto one = sem.acquire(1);
  std::atomic<bool> large_got{false};
  std::thread large([&] {
    auto all = sem.acquire(4, {.wait = 10s});
    large_got = bool(all);
  });
  REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{wide}:semaphore:queue"}) == "1"; }));
  // Three permits are free, but the large request waits ahead: a small one neither tries past it nor waits past it.
  CHECK_FALSE(sem.try_acquire(1));
  std::atomic<bool> small_got{false}, small_after_large{false};
  std::thread small([&] {
    auto permit = sem.acquire(1, {.wait = 10s});
    small_after_large = large_got.load();  // checked on the main thread: Catch2 is not thread-safe
    small_got = true;
  });
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(small_got.load());
  one.unlock();
  large.join();
  small.join();
  CHECK(large_got.load());
  CHECK(small_got.load());
  CHECK(small_after_large.load());  // served after the large request
}

TEST_CASE("set_permits changes the count at run time without losing holders", "[semaphore]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto sem = service->semaphore("api", 2);
  auto a = sem.acquire();
  auto b = sem.acquire();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto c = sem.acquire(1, {.wait = 10s});
    got = bool(c);
  });
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(got.load());
  service->semaphore("api").set_permits(3);  // another handle, the same semaphore
  waiter.join();
  CHECK(got.load());
  CHECK(sem.permits() == 3);
  sem.set_permits(1);  // fewer than held: holders keep theirs
  CHECK(a);
  CHECK(b);
  CHECK(sem.available() == 0);
  a.unlock();
  CHECK_FALSE(sem.try_acquire());  // one still held, the count is 1
  b.unlock();
  CHECK(sem.try_acquire());
}

TEST_CASE("a semaphore refuses bad input with errors that say what to do", "[semaphore][arguments]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  CHECK_THROWS_AS(service->semaphore("", 3), dlock::InvalidArgument);
  CHECK_THROWS_WITH(service->semaphore("s", 0), Catch::Contains("give it 1 to 999999999999999"));
  CHECK_THROWS_AS(service->semaphore("s", 1'000'000'000'000'000), dlock::InvalidArgument);
  auto sem = service->semaphore("s", 3);
  CHECK_THROWS_WITH(sem.acquire(0), Catch::Contains("at least 1"));
  CHECK_THROWS_WITH(sem.acquire(4), Catch::Contains("more permits asked than it has (3)"));
  CHECK_THROWS_WITH(service->semaphore("never-made").acquire(), Catch::Contains("no permit count"));
  CHECK_THROWS_AS(sem.set_permits(-1), dlock::InvalidArgument);
  CHECK_THROWS_AS(sem.acquire(1, {.lease = 0ms}), dlock::InvalidArgument);
  redis.run({"SET", "dlock:{taken}:semaphore:holders", "x"});
  CHECK_THROWS_AS(service->semaphore("taken", 2).acquire(), dlock::RedisError);
  CHECK(sem.available() == 3);  // nothing was lost on the way
}

TEST_CASE("a semaphore's permit is renewed by the watchdog and reported lost when deleted", "[semaphore][watchdog]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.lock.watchdog_timeout = 600ms;
    c.logging.level = "off";
  });
  auto sem = service->semaphore("renewed", 1);
  auto permit = sem.acquire();
  std::this_thread::sleep_for(1500ms);  // two leases: only renewals keep it
  CHECK(permit);
  CHECK(sem.available() == 0);
  std::string lost_key;
  std::mutex mutex;
  service->on_lost([&](const std::string& key) {
    std::lock_guard guard(mutex);
    lost_key = key;
  });
  const std::string record = redis.run({"KEYS", "dlock:{renewed}:semaphore:holders:*"});  // the one holder's
  REQUIRE(record.find(' ') == std::string::npos);
  REQUIRE(redis.run({"DEL", record}) == "1");
  CHECK(dlock::test::eventually([&] { return permit.lost(); }, 3000ms));
  CHECK(permit.stop_token().stop_requested());
  CHECK(dlock::test::eventually([&] {
    std::lock_guard guard(mutex);
    return lost_key == "renewed";
  }));
  CHECK_THROWS_AS(permit.unlock(), dlock::LockLostError);
}

TEST_CASE("WITH_DISTRIBUTED_PERMIT takes a handle or a name", "[semaphore][macros]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  DISTRIBUTED_LOCK_SERVICE(service);
  auto calls = service->semaphore("calls", 2);
  int ran = 0;
  WITH_DISTRIBUTED_PERMIT(calls) {
    CHECK(calls.available() == 1);
    WITH_DISTRIBUTED_PERMIT("calls", {.wait = 1s}) {  // by name: the count is in Redis now
      CHECK(calls.available() == 0);
      ++ran;
    }
    ++ran;
  }
  CHECK(ran == 2);
  CHECK(calls.available() == 2);
  CHECK_THROWS_WITH([&] { WITH_DISTRIBUTED_PERMIT("unknown") { ++ran; } }(), Catch::Contains("no permit count"));
  CHECK(ran == 2);
}

TEST_CASE("a grant whose reply was lost is adopted only by a retry asking the same permits", "[semaphore][identity]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.command_timeout = 200ms;
    c.logging.level = "off";
  });
  auto sem = service->semaphore("orphan", 4);
  sem.acquire().unlock();  // the count and the scripts are in Redis before it freezes
  CHECK(sem.available() == 4);
  redis.freeze();
  // Sent, never answered in time: this thread remembers the acquisition for its next try.
  CHECK_THROWS_AS(sem.acquire(1, {.wait = 500ms}), dlock::ConnectionError);
  redis.thaw();
  // Redis ran the call it had read once thawed: one permit is held for that acquisition.
  REQUIRE(dlock::test::eventually([&] { return sem.available() == 3; }, 3000ms));
  auto three = sem.acquire(3, {.wait = 2s});  // the same thread, another count: not the orphan's grant
  REQUIRE(three);
  CHECK(sem.available() == 1);
  three.unlock();
  CHECK(sem.available() == 4);
}
