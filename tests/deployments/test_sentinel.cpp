// Sentinel mode: a service finds the master through the Sentinels and follows
// failovers by itself. Each topology (a master, replicas, three Sentinels)
// costs seconds, so each test case walks through several steps on one.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <iostream>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "deployment_yaml.hpp"
#include "lost_times.hpp"
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

// What Sentinel `sentinel` names as the master, "host port".
std::string named_by(const SentinelTopology& deployment, std::size_t sentinel) {
  return deployment.ask_sentinel(sentinel, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"});
}

dlock::test::RedisServer& server_at(SentinelTopology& deployment, int port) {
  for (const auto& server : deployment.servers()) {
    if (server->port() == port) return *server;
  }
  throw std::runtime_error("no server at port " + std::to_string(port));
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

TEST_CASE("after a crashed master's failover, a holder whose lock the new master lacks is told at once",
          "[sentinel][fault]") {
  // The default lease (30 s): the next renewal is 10 s after the grant, and
  // the failover takes 2-4 s; a verdict within 3 s of the new master being
  // named came from the round its arrival triggered, not from that renewal.
  SentinelTopology deployment;
  dlock::Config config = deployment.config();
  config.lock.watchdog_timeout = 30000ms;
  auto service = dlock::make_lock_service(config);
  dlock::test::LostTimes lost;
  lost.hook(*service);
  auto kept = service->lock("kept");
  auto dropped = service->lock("dropped");
  REQUIRE(dlock::test::eventually([&] {
    for (const auto& server : deployment.servers()) {
      if (server->run({"EXISTS", "dlock:{dropped}"}) != "1" || server->run({"EXISTS", "dlock:{kept}"}) != "1") {
        return false;
      }
    }
    return true;
  }));
  // As if "dropped" had not reached the replicas before the crash.
  const dlock::NodeAddress first_master = deployment.master_address();
  for (const auto& server : deployment.servers()) {
    if (server->port() == first_master.port) continue;
    REQUIRE(server->run({"CONFIG", "SET", "replica-read-only", "no"}) == "OK");
    REQUIRE(server->run({"DEL", "dlock:{dropped}"}) == "1");
  }

  deployment.kill_master();
  REQUIRE(deployment.await_new_master(first_master));
  const auto named = std::chrono::steady_clock::now();
  const auto told_ms = lost.ms_after("dropped", named);
  REQUIRE(told_ms);
  std::cout << "sentinel test: the holder of the lock the new master lacked was told " << *told_ms
            << " ms after the Sentinels all named it (lease 30 s; negative: before the last of them did)\n";
  CHECK(*told_ms < 3000);
  CHECK(dropped.stop_token().stop_requested());
  std::this_thread::sleep_for(1000ms);  // the round renewed "kept" on the new master, which has it
  CHECK(kept);
  CHECK_FALSE(lost.told("kept"));
  CHECK(deployment.master().run({"EXISTS", "dlock:{kept}"}) == "1");
  CHECK_NOTHROW(kept.unlock());
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

// A Sentinel behind the others (here one restarted from its config file after
// a graceful failover) names the old master, which still answers ROLE as a
// master and takes writes for seconds: neither a service starting then nor a
// running one asking again after a timeout may use it.
TEST_CASE("review: a service started while the first Sentinel has not yet seen a failover uses the new master",
          "[sentinel][review]") {
  SentinelTopology deployment;
  const dlock::Config config = deployment.config();
  const dlock::NodeAddress old_master = deployment.master_address();
  const std::string old_text = "127.0.0.1 " + std::to_string(old_master.port);

  // Sentinel 0 is down while Sentinel 1 runs a graceful failover.
  deployment.sentinels()[0]->kill();
  REQUIRE(dlock::test::eventually(
      [&] { return deployment.ask_sentinel(1, {"SENTINEL", "FAILOVER", "mymaster"}) == "OK"; }, 20s));
  std::string new_text;
  REQUIRE(dlock::test::eventually(
      [&] {
        new_text = named_by(deployment, 1);
        return new_text != old_text && named_by(deployment, 2) == new_text;
      },
      20s));
  const int new_port = std::stoi(new_text.substr(new_text.find(' ') + 1));
  dlock::test::RedisServer& promoted = server_at(deployment, new_port);
  dlock::test::RedisServer& demoted = server_at(deployment, old_master.port);
  REQUIRE(dlock::test::eventually([&] { return promoted.run({"ROLE"}).starts_with("master"); }, 10s));

  // A service started now finds the new master (Sentinel 0 is unreachable): it takes a lock there.
  auto first = dlock::make_lock_service(config);
  auto held = first->lock("ledger", {.wait = 5s});
  REQUIRE(held);
  REQUIRE(promoted.run({"EXISTS", "dlock:{ledger}"}) == "1");

  // Sentinel 0 comes back from its config file (a restart, a reboot): for a
  // moment it still names the old master, which still answers ROLE master.
  deployment.sentinels()[0]->start();
  const std::string sentinel0_says = named_by(deployment, 0);
  const std::string demoted_role = demoted.run({"ROLE"});
  std::cout << "review stale_sentinel: sentinel 0 names " << sentinel0_says << " (old " << old_text << ", new "
            << new_text << "); the old master answers ROLE: " << demoted_role.substr(0, 6) << "\n";

  // Another process starts now, with the same configuration.
  auto second = dlock::make_lock_service(config);
  auto taken = second->try_lock("ledger");
  std::cout << "review stale_sentinel: the second service took 'ledger': " << static_cast<bool>(taken)
            << " (on the old master: " << demoted.run({"EXISTS", "dlock:{ledger}"})
            << ", on the new one the first holder's still: " << promoted.run({"HLEN", "dlock:{ledger}"}) << ")\n";
  CHECK_FALSE((taken && held));
  if (taken) taken.detach();
}

TEST_CASE("review: a running service that asks the Sentinels again after a timeout stays on the new master",
          "[sentinel][review]") {
  SentinelTopology deployment;
  dlock::Config config = deployment.config();
  config.redis.command_timeout = 300ms;
  config.lock.watchdog_timeout = 3000ms;
  const dlock::NodeAddress old_master = deployment.master_address();
  const std::string old_text = "127.0.0.1 " + std::to_string(old_master.port);

  deployment.sentinels()[0]->kill();
  REQUIRE(dlock::test::eventually(
      [&] { return deployment.ask_sentinel(1, {"SENTINEL", "FAILOVER", "mymaster"}) == "OK"; }, 20s));
  std::string new_text;
  REQUIRE(dlock::test::eventually(
      [&] {
        new_text = named_by(deployment, 1);
        return new_text != old_text && named_by(deployment, 2) == new_text;
      },
      20s));
  dlock::test::RedisServer& promoted = server_at(deployment, std::stoi(new_text.substr(new_text.find(' ') + 1)));
  dlock::test::RedisServer& demoted = server_at(deployment, old_master.port);
  REQUIRE(dlock::test::eventually([&] { return promoted.run({"ROLE"}).starts_with("master"); }, 10s));

  // Two services on the new master; one holds a lock there.
  auto mover = dlock::make_lock_service(config);
  auto other = dlock::make_lock_service(config);
  auto held = mover->lock("ledger", {.wait = 5s});
  REQUIRE(held);
  REQUIRE(promoted.run({"EXISTS", "dlock:{ledger}"}) == "1");

  // Sentinel 0 comes back from its config file, and a moment later the new
  // master stalls for less than down-after-milliseconds: one call of `mover`
  // times out, so its Sentinels are asked again (Sentinel 0 first).
  deployment.sentinels()[0]->start();
  promoted.freeze();
  try {
    (void)mover->try_lock("probe");
  } catch (const dlock::ConnectionError&) {
  }
  std::this_thread::sleep_for(100ms);
  promoted.thaw();
  std::this_thread::sleep_for(600ms);  // the tracker's look (after 200 ms) is done

  // Where does `mover` send its calls now?
  auto a = mover->try_lock("stock:sku-1");
  auto b = other->try_lock("stock:sku-1");
  std::cout << "review stale_sentinel (running): mover took stock:sku-1: " << static_cast<bool>(a)
            << " (on the old master: " << demoted.run({"EXISTS", "dlock:{stock:sku-1}"})
            << "); other took it too: " << static_cast<bool>(b)
            << " (on the new master: " << promoted.run({"EXISTS", "dlock:{stock:sku-1}"}) << ")\n";
  CHECK_FALSE((a && b));
  // The lock still held on the new master is reported lost to its holder.
  const bool falsely_lost = dlock::test::eventually([&] { return held.lost(); }, 3000ms);
  std::cout << "review stale_sentinel (running): 'ledger' reported lost: " << falsely_lost
            << " while the new master still has it: " << promoted.run({"HLEN", "dlock:{ledger}"}) << "\n";
  CHECK_FALSE(falsely_lost);
  if (a) a.detach();
  if (b) b.detach();
  held.detach();
}
