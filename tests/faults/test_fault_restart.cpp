// Redis restarted without persistence while locks are held and waiters wait.
// Redis forgets every lock (a documented limit of a single Redis); what dlock
// must do is reconnect by itself, tell every holder its lock vanished, let
// the waiters have the locks, and neither hang nor crash.
#include <catch2/catch.hpp>

#include <atomic>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "admin_connection.hpp"
#include "lost_times.hpp"
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

namespace {

// A service with the default lease (30 s: the next renewal is up to 10 s
// away), whose losses `lost` records, holding `key` with its watch connected.
struct DefaultLeaseHolder {
  DefaultLeaseHolder(const dlock::test::RedisServer& redis, dlock::test::LostTimes& lost, const std::string& key)
      : service(dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 30000ms; })) {
    lost.hook(*service);
    guard = service->lock(key);
    std::this_thread::sleep_for(200ms);  // the service's watch on Redis is connected
  }
  std::uint64_t rounds() const { return service->stats().renewal_rounds; }

  std::shared_ptr<dlock::RedisLockService> service;
  dlock::LockGuard guard;
};

// CLIENT KILL of every connection but the asker's: the same server, its data kept.
void kill_clients(const dlock::test::RedisServer& redis) {
  CHECK(redis.run({"CLIENT", "KILL", "TYPE", "normal"}) != "0");
}

}  // namespace

// A holder told within 3 s of the restart was told at the reconnect, not by a renewal.
TEST_CASE("a holder whose lock a restart forgot is told once Redis answers again, not at its next renewal",
          "[fault][restart]") {
  dlock::test::RedisServer redis;
  dlock::test::LostTimes lost;
  DefaultLeaseHolder holder(redis, lost, "forgotten");
  dlock::LockGuard& forgotten = holder.guard;
  auto fixed = holder.service->lock("fixed-lease", {.lease = 60s});  // never renewed: told by its release or clock

  const auto rounds_before = holder.rounds();
  redis.kill();  // no persistence: the restarted server holds no lock
  std::this_thread::sleep_for(1500ms);
  CHECK(holder.rounds() == rounds_before);  // nothing is renewed while Redis is down
  redis.start();
  const auto up = std::chrono::steady_clock::now();

  const auto told_ms = lost.ms_after("forgotten", up);
  REQUIRE(told_ms);
  std::cout << "restart test: the holder was told " << *told_ms
            << " ms after the restarted Redis answered (lease 30 s, next renewal due in 10 s)\n";
  CHECK(*told_ms < 3000);
  CHECK(forgotten.lost());
  CHECK(forgotten.stop_token().stop_requested());
  // One immediate round, not a round per reconnect attempt during the outage.
  CHECK(holder.rounds() - rounds_before <= 2);
  CHECK_FALSE(lost.told("fixed-lease"));
  CHECK_THROWS_AS(fixed.unlock(), dlock::LockLostError);
  CHECK_THROWS_AS(forgotten.unlock(), dlock::LockLostError);
}

TEST_CASE("a reconnect to the same server, or a restart that kept its data, costs no holder its lock",
          "[fault][restart]") {
  // AOF with appendfsync always: the restarted server has every lock it granted.
  dlock::test::RedisServer redis({"--appendonly", "yes", "--appendfsync", "always"});
  dlock::test::LostTimes lost;
  DefaultLeaseHolder holder(redis, lost, "kept");

  // Every connection killed, the same server: its run_id says it kept its data, so nothing is renewed.
  const auto rounds_before = holder.rounds();
  kill_clients(redis);
  std::this_thread::sleep_for(1000ms);
  CHECK(holder.rounds() == rounds_before);

  redis.stop();
  redis.start();
  // The restart is a reset (a new run_id): one round renews the lock, which the server kept.
  CHECK(dlock::test::eventually([&] { return holder.rounds() > rounds_before; }, 3s));
  std::this_thread::sleep_for(500ms);
  CHECK(holder.guard);
  CHECK_FALSE(lost.told("kept"));
  CHECK_NOTHROW(holder.guard.unlock());
}

TEST_CASE("without INFO, every reconnect counts as a restart: the holders' locks are renewed at once",
          "[fault][restart]") {
  // As for a user without +info: the run_id cannot be read.
  dlock::test::RedisServer redis({"--rename-command", "INFO", ""});
  dlock::test::LostTimes lost;
  DefaultLeaseHolder holder(redis, lost, "kept");

  const auto rounds_before = holder.rounds();
  kill_clients(redis);
  CHECK(dlock::test::eventually([&] { return holder.rounds() > rounds_before; }, 3s));
  CHECK(holder.guard);

  auto forgotten = holder.service->lock("forgotten");
  redis.kill();
  redis.start();
  const auto up = std::chrono::steady_clock::now();
  const auto told_ms = lost.ms_after("forgotten", up);
  REQUIRE(told_ms);
  CHECK(*told_ms < 3000);
  CHECK(lost.told("kept"));
}

// The watch's connection to a master that accepts connections and then
// refuses them (maxclients reached, here) was dialled again at once after
// each refusal: thousands of connections a second (CI saw 11,651 in the
// subscriber's back-off test, whose limit it broke). It now backs off.
TEST_CASE("the master watch does not dial a server that accepts and refuses every connection in a loop",
          "[restart]") {
  dlock::test::RedisServer redis;
  dlock::test::AdminConnection admin(redis);
  auto service = dlock::test::make_service(redis);
  // The service's connection is open; none more may be: the watch's first dial (at the first lock) is refused.
  REQUIRE(admin.run({"CONFIG", "SET", "maxclients", std::to_string(dlock::test::connected_clients(admin))}) == "OK");
  const long long before = dlock::test::info_field(admin, "stats", "rejected_connections");
  auto guard = service->lock("refused-watch", {.lease = 10s});
  std::this_thread::sleep_for(1000ms);
  const long long rejected = dlock::test::info_field(admin, "stats", "rejected_connections") - before;
  admin.run({"CONFIG", "SET", "maxclients", "10000"});
  INFO("connections refused in one second: " << rejected);
  CHECK(rejected >= 1);   // the watch did try
  CHECK(rejected <= 10);  // 50, 100, 200, 400 ms apart: a handful, not a loop
}
