// lock.replica_acks over real Sentinel failovers: a master with one replica,
// three Sentinels, the master SIGKILLed again and again while threads take a
// lock in turn. Every hold records its fencing token: with replica_acks 1 no
// token repeats or goes back, and no two holds overlap, across every failover.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "sentinel_topology.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("with replica_acks 1, Sentinel failovers in a loop never repeat a fencing token nor overlap two holders",
          "[sentinel][replica_acks][fault]") {
  dlock::test::SentinelTopology topology(dlock::test::SentinelTopology::Options{.replicas = 1, .sentinels = 3, .master_name = "mymaster", .sentinel_password = "", .down_after = 1000ms, .failover_timeout = 3000ms});
  dlock::Config config = topology.config();
  config.lock.replica_acks = 1;
  config.lock.replica_ack_timeout = 200ms;
  auto service = dlock::make_lock_service(config);

  std::mutex mutex;
  std::vector<std::uint64_t> tokens;  // guarded by mutex: in the order the holds happened
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back([&] {
      while (!stop) {
        try {
          // A fixed lease: a release the failover cut leaves the lock for at most that long.
          auto guard = service->lock("ledger", {.wait = 30s, .lease = 2s});
          if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
          {
            std::lock_guard lock(mutex);
            tokens.push_back(guard.fencing_token());
          }
          std::this_thread::sleep_for(2ms);
          inside.fetch_sub(1);
          guard.unlock();
        } catch (const dlock::Error&) {
          // An outage may cut a release or outlast a wait: the next round tries again.
          std::this_thread::sleep_for(20ms);
        }
      }
    });
  }

  constexpr int kFailovers = 3;
  for (int round = 0; round < kFailovers; ++round) {
    std::this_thread::sleep_for(500ms);
    const dlock::NodeAddress old_master = topology.master_address();
    auto& killed = topology.kill_master();
    REQUIRE(topology.await_new_master(old_master));
    // Back as a replica of the new master, so that the next grants can be acknowledged.
    killed.start();
    std::size_t before = 0;
    {
      std::lock_guard lock(mutex);
      before = tokens.size();
    }
    // The workers get on again with the new master once it has a replica.
    INFO("failover " << round + 1 << "; the new master's replication: " << topology.master().run({"INFO", "replication"}));
    CHECK(dlock::test::eventually([&] {
      std::lock_guard lock(mutex);
      return tokens.size() > before + 5;
    }, 20s));
  }
  stop = true;
  for (auto& worker : workers) worker.join();

  CHECK(overlaps.load() == 0);
  std::lock_guard lock(mutex);
  REQUIRE(tokens.size() > 20);
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    INFO("hold " << i << " of " << tokens.size());
    CHECK(tokens[i] > tokens[i - 1]);
  }
}
