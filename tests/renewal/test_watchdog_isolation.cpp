// The watchdog's promises hold whatever else is slow: a Redis that does not
// answer, a pool saturated by user traffic, a lost-lock hook that blocks or
// drops the last reference to the service.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "services.hpp"
#include "fault_tools.hpp"

using namespace std::chrono_literals;

TEST_CASE("a holder is told before Redis can expire its lock even while the renewal is stuck on a frozen Redis",
          "[watchdog][fault]") {
  dlock::test::RedisServer redis;
  // Connecting and commands may take far longer than the lease: the renewal must not wait for them.
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.connect_timeout = 5000ms;
    c.redis.command_timeout = 5000ms;
    c.lock.watchdog_timeout = 900ms;
  });
  std::atomic<long long> told_after_ms{-1};
  std::chrono::steady_clock::time_point granted;
  service->on_lost([&](const std::string&) { told_after_ms = dlock::test::elapsed_ms(granted); });
  granted = std::chrono::steady_clock::now();
  auto guard = service->lock("frozen");
  const long long lock_ms = dlock::test::elapsed_ms(granted);
  redis.freeze();  // accepts connections, answers nothing; its clock (and the lease) runs on
  long long flag_ms = -1, stop_ms = -1;
  while (dlock::test::elapsed_ms(granted) < 1000) {
    if (flag_ms < 0 && guard.lost()) flag_ms = dlock::test::elapsed_ms(granted);
    if (stop_ms < 0 && guard.stop_token().stop_requested()) stop_ms = dlock::test::elapsed_ms(granted);
    std::this_thread::sleep_for(1ms);
  }
  INFO("lost() at " << flag_ms << " ms, stop at " << stop_ms);
  CHECK(dlock::test::eventually([&] { return told_after_ms.load() >= 0; }, 3000ms));
  redis.thaw();
  // Told before 900 ms after the grant: Redis could not have expired the lock before then.
  INFO("lock() took " << lock_ms << " ms");
  CHECK(flag_ms >= 0);
  CHECK(flag_ms < 900);
  CHECK(stop_ms >= 0);
  CHECK(stop_ms < 900);
  CHECK(told_after_ms.load() < 900);
}

TEST_CASE("renewals do not wait behind user traffic that holds every pooled connection", "[watchdog]") {
  dlock::test::RedisServer redis;
  dlock::Config config = redis.config();
  config.redis.pool_size = 1;
  config.redis.command_timeout = 4000ms;
  config.lock.watchdog_timeout = 900ms;
  auto executor = std::make_shared<dlock::HiredisExecutor>(config.redis);
  executor->connect();
  auto service = std::make_shared<dlock::RedisLockService>(executor, config.lock);
  auto guard = service->lock("busy-pool");
  // The only pooled connection sits in a blocking pop for 3 s: three renewal periods and more.
  auto blocked = std::async(std::launch::async, [&] { return executor->command({"BLPOP", "nothing", "3"}); });
  std::this_thread::sleep_for(2500ms);
  CHECK_FALSE(guard.lost());
  CHECK(guard);
  CHECK(redis.run({"EXISTS", "dlock:{busy-pool}"}) == "1");
  blocked.get();
  guard.unlock();
  CHECK(service->stats().lost == 0);
}

TEST_CASE("a slow lost-lock hook delays neither other locks' renewals nor their loss", "[watchdog]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 900ms; });
  std::atomic<int> calls{0};
  service->on_lost([&](const std::string& key) {
    calls.fetch_add(1);
    if (key == "first") std::this_thread::sleep_for(3000ms);
  });
  auto first = service->lock("first");
  auto second = service->lock("second");
  auto third = service->lock("third");
  redis.run({"DEL", "dlock:{first}"});
  REQUIRE(dlock::test::eventually([&] { return calls.load() == 1; }, 2000ms));
  // While the hook sleeps, the second lock stays renewed...
  std::this_thread::sleep_for(1500ms);
  CHECK(second);
  CHECK_FALSE(second.lost());
  // ...and the third, deleted now, is marked lost at once (flag and stop token), its hook queued.
  redis.run({"DEL", "dlock:{third}"});
  CHECK(dlock::test::eventually([&] { return third.lost() && third.stop_token().stop_requested(); }, 1000ms));
  CHECK(dlock::test::eventually([&] { return calls.load() == 2; }, 4000ms));
  second.unlock();
}

TEST_CASE("a hook that drops the guards and the last reference to the service, with two locks lost at once, is safe",
          "[watchdog][lifecycle]") {
  // Run under ASan by ./scripts/test.sh --sanitize address: any use of the destroyed service fails it.
  dlock::test::RedisServer redis;
  struct Holder {
    std::shared_ptr<dlock::RedisLockService> service;
    dlock::LockGuard a, b;
  };
  auto holder = std::make_shared<Holder>();
  holder->service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.lock.watchdog_timeout = 900ms;
    c.redis.command_timeout = 200ms;
    c.redis.connect_timeout = 200ms;
  });
  std::atomic<int> calls{0};
  std::mutex mutex;
  std::shared_ptr<Holder> owned = holder;
  holder->service->on_lost([&](const std::string&) {
    std::shared_ptr<Holder> last;
    {
      std::lock_guard lock(mutex);
      if (owned) {
        // Both locks must be lost before the guards go: on a loaded machine the two
        // may be found gone in different rounds, and a guard released first is no
        // longer watched. The hook runs off the renewer, so b's round goes on meanwhile.
        dlock::test::eventually([&] { return owned->a.lost() && owned->b.lost(); }, 4000ms);
        redis.stop();  // Redis is unreachable when the guards release
      }
      last = std::move(owned);
    }
    last.reset();  // the guards release (and fail: logged, not thrown), then the service goes
    calls.fetch_add(1);
  });
  holder->a = holder->service->lock("a");
  holder->b = holder->service->lock("b");
  std::weak_ptr<Holder> watch = holder;
  holder.reset();
  redis.run({"DEL", "dlock:{a}", "dlock:{b}"});  // the next round finds both gone
  CHECK(dlock::test::eventually([&] { return calls.load() == 2; }, 5000ms));
  CHECK(watch.expired());
}

TEST_CASE("fixed leases running out do not cut other locks' renewals short on a slow Redis", "[watchdog]") {
  // Fixed-lease locks held past their leases get their verdicts every few ms,
  // while a 3 s watchdog lock is renewed through a Redis answering within 300 ms.
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.lock.watchdog_timeout = 3000ms;
    c.logging.level = "off";  // the fixed-lease locks are reported lost when they run out
  });
  std::atomic<bool> lost_hook{false};
  service->on_lost([&](const std::string& key) {
    if (key == "long") lost_hook = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto watched = service->lock("long");
  REQUIRE(watched);
  // Fixed-lease locks ending every 2 ms from t0+900 ms to t0+3500 ms.
  std::vector<dlock::LockGuard> fixed;
  for (int i = 0; i < 1300; ++i) {
    const auto end = t0 + 900ms + std::chrono::milliseconds(2 * i);
    const auto lease = std::chrono::ceil<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (lease <= 0ms) continue;
    fixed.push_back(service->lock("short-" + std::to_string(i), {.lease = lease}));
  }
  // From t0+800 ms, Redis is slow (each command waits up to 300 ms) but never
  // silent for anything near the 3 s lease.
  std::this_thread::sleep_until(t0 + 800ms);
  std::atomic<bool> stop{false};
  std::thread slow([&] {
    while (!stop) dlock::test::run_back_to_back(redis, {{"DEBUG", "SLEEP", "0.3"}}, 5000ms);
  });
  std::this_thread::sleep_until(t0 + 3600ms);
  stop = true;
  slow.join();
  for (auto& g : fixed) g.detach();
  CHECK_FALSE(watched.lost());
  CHECK_FALSE(lost_hook.load());
  CHECK(redis.run({"EXISTS", "dlock:{long}"}) == "1");
}
