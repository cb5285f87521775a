// Redis restarted without persistence while locks are held and waiters wait.
// Redis forgets every lock (a documented limit of a single Redis); what dlock
// must do is reconnect by itself, tell every holder its lock vanished, let
// the waiters have the locks, and neither hang nor crash.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "services.hpp"

using namespace std::chrono_literals;

namespace {

// What a waiter thread saw; read by the test thread after join().
struct WaiterResult {
  bool got = false;
  int connection_errors = 0;
  long long waited_ms = 0;
  std::string other_error;
};

// Waits for `key` as a service would that retries on ConnectionError, bounded by `limit`.
void wait_retrying(dlock::RedisLockService& service, const std::string& key, std::chrono::milliseconds limit,
                   WaiterResult& result, dlock::LockGuard& out) {
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < limit) {
    try {
      out = service.lock(key, {.wait = 2s});
      result.got = true;
      break;
    } catch (const dlock::ConnectionError&) {
      ++result.connection_errors;
      std::this_thread::sleep_for(50ms);
    } catch (const dlock::LockTimeoutError&) {
    } catch (const std::exception& e) {
      result.other_error = e.what();
      break;
    }
  }
  result.waited_ms = dlock::test::elapsed_ms(start);
}

}  // namespace

TEST_CASE("after a Redis restart holders are told their locks vanished and waiters get them", "[fault][restart]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 3000ms; });
  auto waiting = dlock::test::make_service(redis);
  std::mutex mutex;
  std::set<std::string> lost_keys;
  holder->on_lost([&](const std::string& key) {
    std::lock_guard lock(mutex);
    lost_keys.insert(key);
  });

  auto first = holder->lock("r1");
  auto second = holder->lock("r2");
  auto nested = holder->lock("r2");
  REQUIRE(holder->hold_count("r2") == 2);

  WaiterResult results[2];
  dlock::LockGuard taken[2];
  std::thread waiters[2];
  const char* keys[2] = {"r1", "r2"};
  for (int i = 0; i < 2; ++i) {
    waiters[i] = std::thread([&, i] { wait_retrying(*waiting, keys[i], 20s, results[i], taken[i]); });
  }
  std::this_thread::sleep_for(300ms);  // both are inside lock(), subscribed and asleep

  redis.kill();  // no persistence: every lock is gone with it
  std::this_thread::sleep_for(700ms);
  redis.start();
  const auto up = std::chrono::steady_clock::now();

  // The pool drops its dead connections by itself: the first call after the restart works.
  CHECK_NOTHROW(holder->lock("after-restart").unlock());
  CHECK(dlock::test::elapsed_ms(up) < 1000 + 1000);  // within the connect timeout, with slack

  for (auto& waiter : waiters) waiter.join();
  for (int i = 0; i < 2; ++i) {
    INFO("waiter of " << keys[i] << ": " << results[i].connection_errors << " connection errors, waited "
                      << results[i].waited_ms << " ms, other error '" << results[i].other_error << "'");
    CHECK(results[i].got);
    CHECK(results[i].other_error.empty());
    CHECK(taken[i]);
    CHECK(results[i].waited_ms < 15000);
  }

  // Every holder whose lock vanished is told: lost(), its stop token, on_lost.
  CHECK(dlock::test::eventually([&] { return first.lost() && second.lost() && nested.lost(); }, 10s));
  CHECK(first.stop_token().stop_requested());
  CHECK(second.stop_token().stop_requested());
  CHECK(dlock::test::eventually([&] {
    std::lock_guard lock(mutex);
    return lost_keys == std::set<std::string>{"r1", "r2"};
  }, 10s));
  CHECK(holder->hold_count("r1") == 0);
  CHECK(holder->hold_count("r2") == 0);

  // The old holder's releases report the loss and leave the new owners' locks alone.
  CHECK_THROWS_AS(nested.unlock(), dlock::LockLostError);
  CHECK_THROWS_AS(second.unlock(), dlock::LockLostError);
  CHECK_THROWS_AS(first.unlock(), dlock::LockLostError);
  CHECK(redis.run({"EXISTS", "dlock:{r1}"}) == "1");
  CHECK(redis.run({"EXISTS", "dlock:{r2}"}) == "1");
  for (auto& guard : taken) CHECK_NOTHROW(guard.unlock());
  CHECK(redis.run({"EXISTS", "dlock:{r1}"}) == "0");
  CHECK(redis.run({"EXISTS", "dlock:{r2}"}) == "0");
}

TEST_CASE("after a Redis restart the subscriber resubscribes by itself and release notices wake waiters again",
          "[fault][restart]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiting = dlock::test::make_service(redis);

  // A fixed lease of 20 s: a waiter that got no notice would sleep that long.
  auto held = holder->lock("n1", {.lease = 20s});
  WaiterResult result;
  dlock::LockGuard taken;
  std::thread waiter([&] { wait_retrying(*waiting, "n1", 15s, result, taken); });
  std::this_thread::sleep_for(300ms);

  redis.kill();
  std::this_thread::sleep_for(500ms);
  redis.start();
  const auto up = std::chrono::steady_clock::now();
  waiter.join();
  // The lock vanished with the restart; the subscriber's reconnect notice woke the waiter.
  CHECK(result.got);
  CHECK(dlock::test::elapsed_ms(up) < 5000);
  taken.unlock();

  // On the new connection, a release notice wakes a waiter long before the holder's lease.
  auto again = holder->lock("n2", {.lease = 20s});
  WaiterResult second;
  dlock::LockGuard second_taken;
  std::thread second_waiter([&] { wait_retrying(*waiting, "n2", 15s, second, second_taken); });
  std::this_thread::sleep_for(500ms);
  const auto released = std::chrono::steady_clock::now();
  again.unlock();
  second_waiter.join();
  CHECK(second.got);
  CHECK(second.connection_errors == 0);
  CHECK(dlock::test::elapsed_ms(released) < 3000);
}

TEST_CASE("a waiter whose wait outlasts a Redis outage gets the lock without an error",
          "[fault][restart]") {
  // An outage shorter than the wait is waited out, not thrown at the first ConnectionError.
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 1000ms; });
  auto waiting = dlock::test::make_service(redis);
  auto held = holder->lock("w");

  std::string error;
  bool got = false;
  std::thread waiter([&] {
    try {
      got = static_cast<bool>(waiting->lock("w", {.wait = 15s}));
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(300ms);
  redis.kill();
  std::this_thread::sleep_for(2000ms);  // longer than the holder's lease: the waiter retries while Redis is down
  redis.start();
  waiter.join();
  INFO("waiter error: " << error);
  CHECK(error.empty());
  CHECK(got);
}
