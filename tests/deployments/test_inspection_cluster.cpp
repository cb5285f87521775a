// RedisLockService::status(), force_unlock() and the read-write lock's and
// semaphore's status on a Redis Cluster: each key's scripts go to the master
// of its slot. One throwaway cluster serves the whole file.
#include <catch2/catch.hpp>

#include <set>

#include "shared_cluster.hpp"

using namespace std::chrono_literals;
using dlock::test::cluster_service;
using dlock::test::slot_of;

TEST_CASE("cluster: status and force_unlock find each lock on the master of its slot", "[inspection][cluster]") {
  auto holder = cluster_service();
  auto observer = cluster_service();
  std::vector<std::string> keys;
  std::set<std::uint16_t> slots;
  for (int i = 0; slots.size() < 3; ++i) {
    const std::string key = "spread:" + std::to_string(i);
    if (slots.insert(slot_of(key)).second) keys.push_back(key);
  }
  std::vector<dlock::LockGuard> guards;
  for (const std::string& key : keys) guards.push_back(holder->lock(key));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    INFO(keys[i]);
    const dlock::LockStatus status = observer->status(keys[i]);
    REQUIRE(status.held());
    CHECK(status.holders.front().service);
    CHECK(static_cast<std::uint64_t>(status.fencing_token.value_or(0)) == guards[i].fencing_token());
    const dlock::ForcedUnlock done = observer->force_unlock(keys[i]);
    CHECK(done.removed_holder());
    CHECK_FALSE(observer->locked(keys[i]));
  }
}

TEST_CASE("cluster: the read-write lock's and the semaphore's status and forced releases", "[inspection][cluster]") {
  auto holder = cluster_service();
  auto observer = cluster_service();
  auto writer = holder->write_lock("cluster:doc");
  auto permits = holder->semaphore("cluster:pool", 3).acquire(2);
  CHECK(observer->read_write_status("cluster:doc").writer);
  CHECK(observer->semaphore_status("cluster:pool").in_use == 2);
  CHECK(observer->force_unlock_read_write("cluster:doc").size() == 1);
  CHECK(observer->force_release_permits("cluster:pool").size() == 1);
  CHECK_FALSE(observer->read_write_status("cluster:doc").held());
  CHECK(observer->semaphore_status("cluster:pool").in_use == 0);
}
