// Sentinel mode: a service finds the master through the Sentinels and follows
// failovers by itself. Each topology (a master, replicas, three Sentinels)
// costs seconds, so each test case walks through several steps on one.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "deployment_yaml.hpp"
#include "sentinel_topology.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

using dlock::test::SentinelTopology;

// Calls lock/unlock on one key in a loop until stopped, as a service would
// through a failover: lock() with a wait longer than any failover must never
// throw; a release cut by the outage may throw ConnectionError (documented).
struct BusyWorker {
  explicit BusyWorker(dlock::RedisLockService& service)
      : thread([this, &service] {
          while (!stop) {
            try {
              auto guard = service.lock("busy", {.wait = 30s});
              ++cycles;
              try {
                guard.unlock();
              } catch (const dlock::ConnectionError&) {
                ++failed_releases;
              } catch (const dlock::LockLostError&) {
                ++failed_releases;  // a release the outage cut, then found the lease gone
              }
            } catch (const std::exception& e) {
              std::lock_guard lock(mutex);
              escaped.push_back(e.what());
            }
            std::this_thread::sleep_for(20ms);
          }
        }) {}
  ~BusyWorker() { finish(); }
  void finish() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
  std::atomic<bool> stop{false};
  std::atomic<int> cycles{0};
  std::atomic<int> failed_releases{0};
  std::mutex mutex;
  std::vector<std::string> escaped;  // guarded by mutex
  std::thread thread;
};

// How long until `service` takes and frees a fresh lock again (first try per 50 ms).
long long ms_until_usable(dlock::RedisLockService& service, const std::string& key) {
  const auto start = std::chrono::steady_clock::now();
  while (dlock::test::elapsed_ms(start) < 30000) {
    try {
      auto guard = service.try_lock(key);
      if (guard) return dlock::test::elapsed_ms(start);
    } catch (const dlock::ConnectionError&) {
    }
    std::this_thread::sleep_for(50ms);
  }
  return -1;
}

}  // namespace

TEST_CASE("start-up errors name the Sentinels asked and the setting to check", "[sentinel]") {
  SentinelTopology deployment({.replicas = 0, .sentinels = 1, .sentinel_password = "s3cret"});
  const dlock::Config good = deployment.config();

  SECTION("no Sentinel reachable") {
    dlock::Config config = good;
    const int a = dlock::test::free_loopback_port();
    const int b = dlock::test::free_loopback_port();
    config.redis.sentinel.nodes = {{"127.0.0.1", a}, {"127.0.0.1", b}};
    REQUIRE_THROWS_AS(dlock::make_lock_service(config), dlock::ConnectionError);
    REQUIRE_THROWS_WITH(dlock::make_lock_service(config),
                        Contains("127.0.0.1:" + std::to_string(a)) && Contains("127.0.0.1:" + std::to_string(b)) &&
                            Contains("connection refused") && Contains("redis.sentinel.nodes"));
  }
  SECTION("the master name is unknown to the Sentinels") {
    dlock::Config config = good;
    config.redis.sentinel.master_name = "nosuchmaster";
    REQUIRE_THROWS_WITH(dlock::make_lock_service(config),
                        Contains("does not monitor 'nosuchmaster'") && Contains("redis.sentinel.master_name"));
  }
  SECTION("the Sentinels refuse the password, or want one") {
    dlock::Config config = good;
    config.redis.sentinel.password = "wrong";
    REQUIRE_THROWS_WITH(dlock::make_lock_service(config), Contains("AUTH refused") && Contains("WRONGPASS") &&
                                                              Contains("redis.sentinel.password"));
    config.redis.sentinel.password = "";
    REQUIRE_THROWS_WITH(dlock::make_lock_service(config),
                        Contains("NOAUTH") && Contains("redis.sentinel.password"));
  }
  SECTION("an unreachable Sentinel listed first is passed over") {
    dlock::Config config = good;
    config.redis.sentinel.nodes.insert(config.redis.sentinel.nodes.begin(),
                                       {"127.0.0.1", dlock::test::free_loopback_port()});
    auto service = dlock::make_lock_service(config);
    auto guard = service->lock("works");
    REQUIRE(guard);
    REQUIRE(deployment.servers()[0]->run({"EXISTS", "dlock:{works}"}) == "1");
  }
}

TEST_CASE("a service follows a crashed master's failover, then a graceful one, by itself", "[sentinel][fault]") {
  SentinelTopology deployment;
  const auto config = [&](std::chrono::milliseconds lease) {
    dlock::Config c = deployment.config();
    c.lock.watchdog_timeout = lease;
    return c;
  };
  // A user's config file, written before any failover and used unchanged after them.
  const dlock::test::TempDir files;
  const std::string yaml = files.write("sentinel.yaml", dlock::test::deployment_yaml(deployment.config().redis));
  auto holders = dlock::make_lock_service(config(6000ms));
  auto waiters = dlock::make_lock_service(config(6000ms));
  std::mutex mutex;
  std::set<std::string> lost_keys;  // guarded by mutex
  holders->on_lost([&](const std::string& key) {
    std::lock_guard lock(mutex);
    lost_keys.insert(key);
  });
  BusyWorker busy(*waiters);

  // --- The master is SIGKILLed while locks are held and waiters wait.
  auto kept = holders->lock("kept");                       // the new master will have it
  auto dropped = holders->lock("dropped");                 // the new master will not
  auto fixed = holders->lock("fixed", {.lease = 15000ms});  // a fixed lease, no watchdog
  const std::stop_token dropped_stop = dropped.stop_token();
  std::jthread kept_waiter, dropped_waiter;
  std::atomic<bool> kept_waiter_got{false}, dropped_waiter_got{false};
  std::string waiter_error;  // written by the waiters before join
  const auto wait_for = [&](const std::string& key, std::atomic<bool>& got) {
    return std::jthread([&, key] {
      try {
        auto guard = waiters->lock(key, {.wait = 40s});
        got = guard.operator bool();
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        waiter_error = key + ": " + e.what();
      }
    });
  };
  kept_waiter = wait_for("kept", kept_waiter_got);
  dropped_waiter = wait_for("dropped", dropped_waiter_got);
  REQUIRE(dlock::test::eventually([&] {
    return deployment.master().run({"ZCARD", "dlock:{kept}:queue"}) == "1" &&
           deployment.master().run({"ZCARD", "dlock:{dropped}:queue"}) == "1";
  }));
  // Every replica has it all (replication is asynchronous: the test waits for it).
  const dlock::NodeAddress first_master = deployment.master_address();
  REQUIRE(dlock::test::eventually([&] {
    for (const auto& server : deployment.servers()) {
      if (server->run({"ZCARD", "dlock:{dropped}:queue"}) != "1") return false;
    }
    return true;
  }));

  dlock::test::RedisServer& crashed = deployment.kill_master();
  const auto killed_at = std::chrono::steady_clock::now();
  // A lock() started during the outage with a wait longer than the failover just waits.
  std::atomic<bool> during_got{false};
  std::jthread during = wait_for("taken-during-the-outage", during_got);
  const long long usable_ms = ms_until_usable(*holders, "probe-after-crash");
  REQUIRE(usable_ms >= 0);
  REQUIRE(deployment.await_new_master(first_master));
  std::cout << "sentinel test: after SIGKILL of the master, the service took a lock again after " << usable_ms
            << " ms (down-after-milliseconds 1000)\n";
  during.join();
  REQUIRE(during_got);

  // As if "dropped" had never been replicated: the new master lacks it.
  dlock::test::RedisServer& second = deployment.master();
  REQUIRE(second.port() != first_master.port);
  REQUIRE(second.run({"DEL", "dlock:{dropped}"}) == "1");
  const auto deleted_at = std::chrono::steady_clock::now();
  // Its holder is told within a renewal period (lease/3), the others keep theirs.
  REQUIRE(dlock::test::eventually([&] { return dropped.lost(); }, 6000ms));
  std::cout << "sentinel test: the holder of the lock the new master lacked was told after "
            << dlock::test::elapsed_ms(deleted_at) << " ms (lease 6000 ms)\n";
  REQUIRE(dropped_stop.stop_requested());
  REQUIRE(dlock::test::eventually([&] {
    std::lock_guard lock(mutex);
    return lost_keys.contains("dropped");
  }));
  // Its waiter, whose place in line moved with the data, gets it.
  REQUIRE(dlock::test::eventually([&] { return dropped_waiter_got.load(); }, 10000ms));
  std::this_thread::sleep_for(2100ms);  // more than a renewal period on the new master
  REQUIRE(kept);
  REQUIRE_FALSE(kept_waiter_got);
  kept.unlock();
  REQUIRE(dlock::test::eventually([&] { return kept_waiter_got.load(); }, 10000ms));
  fixed.unlock();  // released on the new master, where it was replicated
  REQUIRE(second.run({"EXISTS", "dlock:{fixed}"}) == "0");
  kept_waiter.join();
  dropped_waiter.join();
  REQUIRE(waiter_error.empty());
  {
    std::lock_guard lock(mutex);
    REQUIRE(lost_keys == std::set<std::string>{"dropped"});
  }
  std::cout << "sentinel test: crash failover handled " << dlock::test::elapsed_ms(killed_at) << " ms after the kill\n";

  // --- The crashed master comes back (as a replica), then a graceful SENTINEL FAILOVER.
  crashed.start();
  auto held = holders->lock("held-through-graceful");
  std::atomic<bool> graceful_waiter_got{false};
  std::jthread graceful_waiter = wait_for("held-through-graceful", graceful_waiter_got);
  REQUIRE(dlock::test::eventually([&] { return second.run({"ZCARD", "dlock:{held-through-graceful}:queue"}) == "1"; }));
  // SENTINEL FAILOVER wants a replica in sync (NOGOODSLAVE until then) and no failover in progress.
  const auto graceful_from = deployment.master_address();
  REQUIRE(dlock::test::eventually(
      [&] {
        try {
          deployment.failover();
          return true;
        } catch (const std::runtime_error&) {
          return false;
        }
      },
      20000ms));
  const auto switched_at = std::chrono::steady_clock::now();
  REQUIRE(deployment.await_new_master(graceful_from));
  const long long graceful_ms = ms_until_usable(*holders, "probe-after-graceful");
  std::cout << "sentinel test: after SENTINEL FAILOVER the service took a lock on the new master "
            << dlock::test::elapsed_ms(switched_at) << " ms after the command (" << graceful_ms
            << " ms after the Sentinels agreed)\n";
  dlock::test::RedisServer& third = deployment.master();
  REQUIRE(third.port() != graceful_from.port);
  // The old master stays up as a replica; the holder's lock moved with the data and stays held.
  std::this_thread::sleep_for(2100ms);
  REQUIRE(held);
  REQUIRE(third.run({"EXISTS", "dlock:{held-through-graceful}"}) == "1");
  held.unlock();
  REQUIRE(dlock::test::eventually([&] { return graceful_waiter_got.load(); }, 10000ms));
  graceful_waiter.join();

  busy.finish();
  {
    std::lock_guard lock(busy.mutex);
    INFO("escaped: " << (busy.escaped.empty() ? "" : busy.escaped.front()));
    REQUIRE(busy.escaped.empty());
  }
  REQUIRE(busy.cycles > 10);
  std::cout << "sentinel test: busy worker ran " << busy.cycles << " cycles, " << busy.failed_releases
            << " releases cut by the failovers\n";
  std::lock_guard lock(mutex);
  REQUIRE(lost_keys == std::set<std::string>{"dropped"});

  // The example and the command, from the file written before both failovers, on the third master.
#ifdef FLASH_SALE_BIN  // the examples are built
  dlock::test::check_examples_and_cli(yaml, "SENTINEL-AFTER");
  CHECK(third.run({"GET", "stock:SENTINEL-AFTER"}) == "0");
#endif
}

TEST_CASE("over TLS everywhere, the Sentinels are asked and a crashed master's failover is followed", "[sentinel][tls]") {
  SentinelTopology::Options options;
  options.replicas = 1;
  options.tls = true;
  SentinelTopology deployment(options);
  dlock::Config config = deployment.config();
  REQUIRE(config.redis.tls.enabled);
  config.lock.watchdog_timeout = 6000ms;
  auto service = dlock::make_lock_service(config);
  auto kept = service->lock("tls-kept");
  auto waiting = std::async(std::launch::async, [&] {
    return static_cast<bool>(dlock::make_lock_service(config)->lock("tls-kept", {.wait = 40s}));
  });
  REQUIRE(dlock::test::eventually([&] {
    for (const auto& server : deployment.servers()) {
      if (server->run({"ZCARD", "dlock:{tls-kept}:queue"}) != "1") return false;
    }
    return true;
  }));
  const dlock::NodeAddress first_master = deployment.master_address();
  deployment.kill_master();
  REQUIRE(deployment.await_new_master(first_master));
  REQUIRE(ms_until_usable(*service, "tls-probe") >= 0);
  std::this_thread::sleep_for(2100ms);  // a renewal period on the new master, over TLS
  REQUIRE(kept);
  CHECK(deployment.master().run({"EXISTS", "dlock:{tls-kept}"}) == "1");
  kept.unlock();
  REQUIRE(waiting.wait_for(20s) == std::future_status::ready);
  CHECK(waiting.get());
}
