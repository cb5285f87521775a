// RedisLockService::status() and force_unlock() on every deployment `dlock status`
// reads: over TLS, behind Sentinel, and over a Redlock, where a lock is held only
// where a majority of the nodes hold it. (Cluster: test_inspection_cluster.cpp.)
#include <catch2/catch.hpp>

#include "redlock_nodes.hpp"
#include "sentinel_topology.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using dlock::test::nodes_holding;
using dlock::test::RedlockNodes;

namespace {

// Status and forced release seen from a second service on the same deployment.
void check_status_and_forced_unlock(dlock::RedisLockService& holder, dlock::RedisLockService& observer) {
  auto guard = holder.lock("inspected");
  const dlock::LockStatus status = observer.status("inspected");
  REQUIRE(status.held());
  CHECK(status.holders.front().hold_count == 1);
  CHECK(status.holders.front().service);
  REQUIRE(status.fencing_token);
  CHECK(static_cast<std::uint64_t>(*status.fencing_token) == guard.fencing_token());
  const dlock::ForcedUnlock done = observer.force_unlock("inspected");
  REQUIRE(done.owners.size() == 1);
  CHECK(done.owners.front().owner == status.holders.front().owner);
  CHECK(done.removed_holder());
  CHECK_FALSE(observer.locked("inspected"));
}

}  // namespace

TEST_CASE("status and force_unlock work over TLS", "[inspection][tls]") {
  dlock::test::RedisServer redis({}, dlock::test::ServerTls{});
  auto holder = dlock::test::make_service(redis);
  auto observer = dlock::test::make_service(redis);
  check_status_and_forced_unlock(*holder, *observer);
  CHECK(redis.run({"EXISTS", "dlock:{inspected}"}) == "0");
}

TEST_CASE("status and force_unlock work behind Sentinel on the master it names", "[inspection][sentinel]") {
  dlock::test::SentinelTopology deployment({.replicas = 1, .sentinels = 1, .sentinel_password = {}});
  auto holder = dlock::make_lock_service(deployment.config());
  auto observer = dlock::make_lock_service(deployment.config());
  check_status_and_forced_unlock(*holder, *observer);
  CHECK(deployment.master().run({"EXISTS", "dlock:{inspected}"}) == "0");
}

TEST_CASE("over a Redlock status and force_unlock act on every node and answer for the majority",
          "[inspection][redlock]") {
  RedlockNodes nodes;
  auto holder = dlock::make_lock_service(nodes.config());
  auto observer = dlock::make_lock_service(nodes.config());
  auto guard = holder->lock("inspected");
  REQUIRE(nodes_holding(nodes, "inspected") == 5);
  const dlock::LockStatus status = observer->status("inspected");
  REQUIRE(status.held());
  // The largest of the nodes' counters: the nodes that granted after the majority did drew larger tokens than
  // the one the guard took from the majority, so it is at least the guard's, not always equal to it.
  CHECK(static_cast<std::uint64_t>(status.fencing_token.value_or(0)) >= guard.fencing_token());

  const dlock::ForcedUnlock done = observer->force_unlock("inspected");
  CHECK(done.quorum());
  CHECK(done.nodes == 5);
  CHECK(done.answered == 5);
  REQUIRE(done.owners.size() == 1);
  CHECK(done.owners.front().nodes == 5);
  CHECK(done.held_on_majority(done.owners.front()));
  CHECK(nodes_holding(nodes, "inspected") == 0);
  CHECK_FALSE(observer->locked("inspected"));
}

TEST_CASE("over a Redlock a lock is held only where a majority of the nodes hold it", "[inspection][redlock]") {
  RedlockNodes nodes;
  auto service = dlock::make_lock_service(nodes.config());

  // A grant that reached two of five nodes only: the three others agree it is free.
  for (std::size_t i = 0; i < 2; ++i) nodes[i].run({"HSET", "dlock:{minority}", "someone:1:1", "1"});
  CHECK_FALSE(service->locked("minority"));
  const dlock::ForcedUnlock done = service->force_unlock("minority");
  REQUIRE(done.owners.size() == 1);
  CHECK(done.owners.front().nodes == 2);
  CHECK_FALSE(done.removed_holder());  // a grant no majority held: not the lock's holder

  // Held on three: held, with two nodes down too.
  for (std::size_t i = 0; i < 3; ++i) nodes[i].run({"HSET", "dlock:{majority}", "someone:1:1", "1"});
  const dlock::LockStatus majority = service->status("majority");
  REQUIRE(majority.held());
  CHECK(majority.holders.front().owner == "someone:1:1");
  nodes[3].stop();
  nodes[4].stop();
  CHECK(service->locked("majority"));

  // Two nodes say one owner, one another (two are down): no majority agrees, so nothing is said.
  nodes[2].run({"HSET", "dlock:{split}", "other:1:1", "1"});
  for (std::size_t i = 0; i < 2; ++i) nodes[i].run({"HSET", "dlock:{split}", "someone:1:1", "1"});
  CHECK_THROWS_AS(service->status("split"), dlock::ConnectionError);
}

TEST_CASE("over a Redlock read-write locks and semaphores are refused, as the Redlock has none",
          "[inspection][redlock]") {
  RedlockNodes nodes(3);
  auto service = dlock::make_lock_service(nodes.config());
  CHECK_THROWS_AS(service->read_write_status("doc"), dlock::InvalidArgument);
  CHECK_THROWS_AS(service->semaphore_status("pool"), dlock::InvalidArgument);
  CHECK_THROWS_AS(service->force_unlock_read_write("doc"), dlock::InvalidArgument);
  CHECK_THROWS_AS(service->force_release_permits("pool"), dlock::InvalidArgument);
}
