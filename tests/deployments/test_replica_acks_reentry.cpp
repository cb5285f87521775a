// With lock.replica_acks, a re-entry extends the holder's validity only once
// acknowledged, and a lock handed to the watchdog by a re-entry is renewed
// before the validity it already has runs out (a review found a fixed-lease
// lock re-entered without a lease declared lost without one renewal, while
// Redis and the replica held it).
#include <catch2/catch.hpp>

#include <iostream>
#include <thread>

#include "replicated_pair.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using dlock::test::RedisServer;

TEST_CASE("review: with replica_acks a fixed-lease lock re-entered for the watchdog is renewed, not lost",
          "[replica_acks]") {
  dlock::test::ReplicatedPair pair;
  for (const int acks : {0, 1}) {
    auto service = dlock::test::make_service(pair.master, [&](dlock::Config& c) {
      c.lock.replica_acks = acks;
      c.lock.replica_ack_timeout = 200ms;
      c.lock.watchdog_timeout = 3000ms;  // renewals every 1 s
    });
    const std::string key = "reenter-" + std::to_string(acks);
    auto outer = service->lock(key, {.lease = 1000ms});
    REQUIRE(outer);
    auto inner = service->lock(key);  // no lease: the watchdog keeps it from now on
    REQUIRE(inner);
    std::this_thread::sleep_for(2500ms);
    const auto stats = service->stats();
    const std::string pttl = pair.master.run({"PTTL", "dlock:{" + key + "}"});
    const std::string on_replica = pair.replica.run({"EXISTS", "dlock:{" + key + "}"});
    std::cout << "acks_reenter: replica_acks=" << acks << ": after 2.5 s inner.lost()=" << inner.lost()
              << " held_by_current_thread=" << service->held_by_current_thread(key)
              << " renewals_sent=" << stats.renewals_sent << " lost=" << stats.lost << "; master PTTL " << pttl
              << " ms, on replica: " << on_replica << "\n";
    INFO("replica_acks = " << acks);
    CHECK_FALSE(inner.lost());
    CHECK(service->held_by_current_thread(key));
    if (inner) inner.detach();
    if (outer) outer.detach();
  }
}

TEST_CASE("review: with replica_acks an acknowledged re-entry with a longer fixed lease extends the validity",
          "[replica_acks]") {
  dlock::test::ReplicatedPair pair;
  auto service = dlock::test::make_service(pair.master, [](dlock::Config& c) {
    c.lock.replica_acks = 1;
    c.lock.replica_ack_timeout = 200ms;
  });
  auto outer = service->lock("longer", {.lease = 1000ms});
  REQUIRE(outer);
  auto inner = service->lock("longer", {.lease = 5000ms});
  REQUIRE(inner);
  std::this_thread::sleep_for(1500ms);
  const std::string pttl = pair.master.run({"PTTL", "dlock:{longer}"});
  const std::string replica_pttl = pair.replica.run({"PTTL", "dlock:{longer}"});
  std::cout << "acks_reenter: lease 1 s re-entered with lease 5 s: after 1.5 s inner.lost()=" << inner.lost()
            << " stats.lost=" << service->stats().lost << "; master PTTL " << pttl << " ms, replica PTTL "
            << replica_pttl << " ms\n";
  CHECK_FALSE(inner.lost());
  if (inner) inner.detach();
  if (outer) outer.detach();
}
