// Re-entry by the same thread is counted; only the outermost release frees.
#include <catch2/catch.hpp>

#include "services.hpp"

TEST_CASE("re-entry counts holds and an inner release keeps the outer hold", "[reentry]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);

  CHECK(service->hold_count("order:1") == 0);
  auto outer = service->lock("order:1");
  CHECK(service->hold_count("order:1") == 1);
  {
    auto inner = service->lock("order:1");
    CHECK(service->hold_count("order:1") == 2);
    CHECK(inner.fencing_token() == outer.fencing_token());
    // Redis counts the same holds in the owner's field.
    CHECK(redis.run({"HVALS", "dlock:{order:1}"}) == "2");
  }
  CHECK(service->hold_count("order:1") == 1);
  CHECK(redis.run({"HVALS", "dlock:{order:1}"}) == "1");
  CHECK(outer);
  CHECK_FALSE(other->try_lock("order:1"));

  outer.unlock();
  CHECK(service->hold_count("order:1") == 0);
  CHECK_FALSE(service->held_by_current_thread("order:1"));
  CHECK(redis.run({"EXISTS", "dlock:{order:1}"}) == "0");
  CHECK(other->try_lock("order:1"));
}

TEST_CASE("a deep re-entry unwinds to zero in any order of its guards", "[reentry]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  std::vector<dlock::LockGuard> guards;
  for (int i = 0; i < 10; ++i) guards.push_back(service->lock("deep"));
  CHECK(service->hold_count("deep") == 10);
  // Release the outermost first: the lock stays until the last guard goes.
  guards.front().unlock();
  CHECK(service->hold_count("deep") == 9);
  CHECK(redis.run({"EXISTS", "dlock:{deep}"}) == "1");
  guards.clear();
  CHECK(service->hold_count("deep") == 0);
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{deep}"}));
}

TEST_CASE("re-entry is per thread: another thread of the same service waits", "[reentry]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("shared");
  bool other_thread_got_it = true;
  std::thread([&] { other_thread_got_it = static_cast<bool>(service->try_lock("shared")); }).join();
  CHECK_FALSE(other_thread_got_it);
  CHECK(service->held_by_current_thread("shared"));
}

TEST_CASE("the fencing token grows with each first acquisition only", "[reentry]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  std::uint64_t first = 0;
  {
    auto guard = service->lock("fenced");
    first = guard.fencing_token();
    auto again = service->lock("fenced");
    CHECK(again.fencing_token() == first);
  }
  auto later = service->lock("fenced");
  CHECK(later.fencing_token() == first + 1);
  CHECK(redis.run({"GET", "dlock:{fenced}:fence"}) == std::to_string(first + 1));
}

// The table of held locks is keyed by a view of each record's own key: a
// record replaced by a new grant must leave the entry viewing the new one's.
TEST_CASE("a key taken again after its fixed lease ran out is a new record that re-entry and release find",
          "[reentry][expired]") {
  using namespace std::chrono_literals;
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  auto expired = service->lock("relock", {.lease = 150ms});
  const std::uint64_t old_token = expired.fencing_token();
  // Redis forgets it; the guard stays, as a caller that overran its lease would keep it.
  REQUIRE(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{relock}"}) == "0"; }, 5s));
  auto fresh = service->lock("relock", {.lease = 10s});
  CHECK(fresh.fencing_token() > old_token);
  CHECK(service->hold_count("relock") == 1);
  {
    auto inner = service->lock("relock");  // re-enters the new record, found by its key
    CHECK(inner.fencing_token() == fresh.fencing_token());
    CHECK(service->hold_count("relock") == 2);
    CHECK(redis.run({"HVALS", "dlock:{relock}"}) == "2");
  }
  // The expired guard's release frees nothing of the new hold.
  expired = dlock::LockGuard();
  CHECK(dlock::test::eventually([&] { return service->stats().lost >= 1; }, 5s));
  CHECK(service->hold_count("relock") == 1);
  CHECK(redis.run({"HVALS", "dlock:{relock}"}) == "1");
  CHECK_FALSE(other->try_lock("relock"));
  fresh.unlock();
  CHECK(service->hold_count("relock") == 0);
  CHECK(redis.run({"EXISTS", "dlock:{relock}"}) == "0");
  CHECK(other->try_lock("relock"));
}
