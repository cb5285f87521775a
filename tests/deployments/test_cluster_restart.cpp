// Redis Cluster mode, a master restarted empty: the holders of its locks are
// told once it serves its slots again, not at their next renewal. A file of
// its own, and so a throwaway cluster of its own (a few seconds more).
#include <catch2/catch.hpp>

#include <iostream>
#include <string>
#include <thread>

#include "lost_times.hpp"
#include "services.hpp"
#include "shared_cluster.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using dlock::test::cluster;
using dlock::test::cluster_service;
using dlock::test::slot_of;

TEST_CASE("a master restarted empty: its holders are told once it answers, holders elsewhere keep their locks",
          "[cluster]") {
  // The default lease (30 s): the next renewal is 10 s away, so a verdict
  // within 3 s of the restart came from the round the restart triggered.
  auto service = cluster_service(30s);
  dlock::test::LostTimes lost;
  lost.hook(*service);
  const std::string forgotten = "forgotten";
  const int restarted_port = cluster().master_port(slot_of(forgotten));
  std::string elsewhere;
  for (int i = 0; elsewhere.empty(); ++i) {
    const std::string key = "elsewhere:" + std::to_string(i);
    if (cluster().master_port(slot_of(key)) != restarted_port) elsewhere = key;
  }
  auto forgotten_guard = service->lock(forgotten);
  auto elsewhere_guard = service->lock(elsewhere);
  std::this_thread::sleep_for(200ms);  // the service's watch on the masters is connected

  // Back well within the node timeout: still the master of its slots, without their keys.
  dlock::test::RedisServer& restarted = cluster().node(restarted_port);
  restarted.kill();
  restarted.start();
  const auto up = Clock::now();
  // A restarted master refuses commands (CLUSTERDOWN) for its first 2 s
  // (Redis' CLUSTER_WRITABLE_DELAY): neither the round nor a second owner gets
  // an answer before it serves the slot again.
  while (restarted.run({"EXISTS", "dlock:{" + forgotten + "}"}).starts_with("CLUSTERDOWN") &&
         dlock::test::elapsed_ms(up) < 10000) {
    std::this_thread::sleep_for(5ms);
  }
  const auto serving = Clock::now();
  const auto told_ms = lost.ms_after(forgotten, serving);
  REQUIRE(told_ms);
  std::cout << "cluster test: the holder on the restarted master was told " << *told_ms
            << " ms after it served its slots again (it refused them for "
            << std::chrono::duration_cast<std::chrono::milliseconds>(serving - up).count()
            << " ms after it accepted connections; lease 30 s)\n";
  CHECK(*told_ms < 3000);
  CHECK(forgotten_guard.lost());
  REQUIRE_NOTHROW(cluster().wait_healthy());
  REQUIRE(cluster().master_port(slot_of(forgotten)) == restarted_port);
  std::this_thread::sleep_for(1000ms);
  CHECK(elsewhere_guard);
  CHECK_FALSE(lost.told(elsewhere));
  CHECK_NOTHROW(elsewhere_guard.unlock());
  CHECK(service->lock(forgotten, {.wait = 5s}));
}
