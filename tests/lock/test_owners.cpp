// Re-entry by owner (owner.hpp): an Owner given in LockOptions decides
// re-entry instead of the calling thread, so tasks that share a thread
// (coroutines) exclude each other, and a task that hops threads re-enters
// its own locks. Every owner-keyed rule (re-entry, release by key,
// hold_count, detach, read-write re-entry, multi-lock) works the same with
// explicit owners as with threads.
#include <catch2/catch.hpp>

#include <sstream>
#include <thread>

#include "services.hpp"

using namespace std::chrono_literals;

namespace {

// The hold counts in the lock's hash, one per field, in field order.
std::string hold_counts(const dlock::test::RedisServer& redis, const std::string& key) {
  return redis.run({"HVALS", "dlock:{" + key + "}"});
}

}  // namespace

TEST_CASE("owners: two owners on one thread exclude each other; each re-enters its own hold", "[owners]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const dlock::Owner a = dlock::Owner::create();
  const dlock::Owner b = dlock::Owner::create();
  REQUIRE(a != b);

  auto outer = service->lock("sku:1", {.owner = a});
  CHECK_FALSE(service->try_lock("sku:1", {.owner = b}));  // the same thread, another task: it waits
  CHECK_FALSE(service->try_lock("sku:1"));                // nor is the thread itself the owner
  {
    auto inner = service->lock("sku:1", {.owner = a});
    CHECK(service->hold_count("sku:1", a) == 2);
    CHECK(service->hold_count("sku:1", b) == 0);
    CHECK(service->hold_count("sku:1") == 0);
    CHECK(hold_counts(redis, "sku:1") == "2");  // one acquisition, counted in Redis
    CHECK(inner.fencing_token() == outer.fencing_token());
  }
  CHECK(hold_counts(redis, "sku:1") == "1");
  CHECK(service->held_by("sku:1", a));
  outer.unlock();
  CHECK_FALSE(service->held_by("sku:1", a));
  CHECK(service->try_lock("sku:1", {.owner = b}));
}

TEST_CASE("owners: a guard's owner re-enters its lock from another thread, and the thread's own owner does not",
          "[owners]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto outer = service->lock("hop");  // the calling thread's owner
  CHECK(outer.owner() == dlock::Owner::current_thread());

  bool reentered = false;
  bool other_thread_refused = false;
  std::thread callee([&] {
    other_thread_refused = !service->try_lock("hop");
    auto inner = service->try_lock("hop", {.owner = outer.owner()});
    reentered = static_cast<bool>(inner);
    if (inner) CHECK(hold_counts(redis, "hop") == "2");
  });
  callee.join();
  CHECK(other_thread_refused);
  CHECK(reentered);
  CHECK(hold_counts(redis, "hop") == "1");
  CHECK(service->hold_count("hop") == 1);
}

TEST_CASE("owners: a task that resumes on another thread re-enters and releases its own holds there", "[owners]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const dlock::Owner task = dlock::Owner::create();
  auto first = service->lock("moving", {.owner = task});
  dlock::LockGuard second;
  std::thread([&] { second = service->lock("moving", {.wait = 0ms, .owner = task}); }).join();
  CHECK(second);
  CHECK(service->hold_count("moving", task) == 2);
  std::thread([&] { service->unlock("moving", task); }).join();  // the latest hold: `second`'s
  CHECK_FALSE(second);
  CHECK(first);
  CHECK(service->hold_count("moving", task) == 1);
  std::thread([&] { first.unlock(); }).join();
  CHECK(redis.run({"EXISTS", "dlock:{moving}"}) == "0");
}

TEST_CASE("owners: unlock by key with an owner that holds nothing says which owner and changes nothing",
          "[owners]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const dlock::Owner holder = dlock::Owner::create();
  const dlock::Owner stranger = dlock::Owner::create();
  auto guard = service->lock("named", {.owner = holder});
  try {
    service->unlock("named", stranger);
    FAIL("unlock by a stranger returned");
  } catch (const dlock::NotOwnerError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("owner " + stranger.str() + " holds no hold"));
  }
  CHECK_THROWS_AS(service->unlock("named"), dlock::NotOwnerError);  // the thread is not the owner either
  CHECK(guard);
  CHECK(hold_counts(redis, "named") == "1");
}

TEST_CASE("owners: an owner's id is the middle of its acquisitions' ids, as dlock status shows them", "[owners]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const dlock::Owner task = dlock::Owner::create();
  auto guard = service->lock("shown", {.owner = task});
  const std::string field = redis.run({"HKEYS", "dlock:{shown}"});
  INFO(field);
  CHECK(task.str().size() == 16);
  CHECK(field.substr(33, 16) == task.str());
  std::ostringstream printed;
  printed << task;
  CHECK(printed.str() == task.str());
  CHECK(guard.owner() == task);
  CHECK_THROWS_AS(dlock::LockGuard().owner(), dlock::InvalidArgument);
}

TEST_CASE("owners: a detached hold is held against its own owner too", "[owners]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const dlock::Owner task = dlock::Owner::create();
  service->lock("job", {.lease = 20s, .owner = task}).detach();
  CHECK_FALSE(service->try_lock("job", {.owner = task}));
  CHECK(service->hold_count("job", task) == 0);
}

TEST_CASE("owners: the read-write lock's re-entry rules hold per owner", "[owners][rwlock]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const dlock::Owner writer = dlock::Owner::create();
  const dlock::Owner reader = dlock::Owner::create();
  {
    auto write = service->write_lock("doc", {.owner = writer});
    // A read inside the owner's own write is granted; another owner on the same thread is refused.
    auto read_inside = service->try_read_lock("doc", {.owner = writer});
    CHECK(read_inside);
    CHECK_FALSE(service->try_read_lock("doc", {.owner = reader}));
    CHECK_FALSE(service->try_read_lock("doc"));
  }
  auto shared_a = service->read_lock("doc", {.owner = reader});
  auto shared_b = service->read_lock("doc", {.owner = writer});
  CHECK(shared_a);
  CHECK(shared_b);
  // An owner holding only the read lock may not upgrade: two would wait for each other forever.
  CHECK_THROWS_AS(service->write_lock("doc", {.owner = reader}), dlock::InvalidArgument);
}

TEST_CASE("owners: a multi-lock belongs to its owner: the owner re-enters each key, others wait", "[owners][multi]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const dlock::Owner task = dlock::Owner::create();
  auto both = service->lock_all({"a", "b"}, {.owner = task});
  CHECK_FALSE(service->try_lock("a"));
  CHECK_FALSE(service->try_lock("b", {.owner = dlock::Owner::create()}));
  auto again = service->try_lock("b", {.owner = task});
  CHECK(again);
  CHECK(hold_counts(redis, "b") == "2");
}

TEST_CASE("owners: the block form takes an owner", "[owners][macros]") {
  struct DefaultServiceReset {
    ~DefaultServiceReset() { dlock::set_default_lock_service(nullptr); }
  } reset;
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  dlock::set_default_lock_service(service);
  const dlock::Owner task = dlock::Owner::create();
  bool ran = false;
  WITH_DISTRIBUTED_LOCK("blocked", {.owner = task}) {
    ran = true;
    CHECK(service->hold_count("blocked", task) == 1);
    CHECK_FALSE(service->try_lock("blocked"));  // the thread is not its owner
  }
  CHECK(ran);
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{blocked}"}));
}
