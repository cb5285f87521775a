// Read-write locks and semaphores through the library: read_write_status(),
// semaphore_status(), and their forced releases, as `dlock status` and
// `dlock unlock --force --read-write | --semaphore` do them.
#include <catch2/catch.hpp>

#include <unistd.h>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("read_write_status names the writer and then the readers", "[inspection]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto observer = dlock::test::make_service(redis);
  CHECK_FALSE(observer->read_write_status("doc").held());
  {
    auto writer = holder->write_lock("doc");
    const dlock::ReadWriteLockStatus status = observer->read_write_status("doc");
    REQUIRE(status.writer);
    CHECK(status.writer->hold_count == 1);
    REQUIRE(status.writer->service);
    CHECK(status.writer->service->pid == ::getpid());
    CHECK(status.readers.empty());
    REQUIRE(status.fencing_token);
    CHECK(static_cast<std::uint64_t>(*status.fencing_token) == writer.fencing_token());
  }
  auto reader = holder->read_lock("doc");
  const dlock::ReadWriteLockStatus status = observer->read_write_status("doc");
  CHECK_FALSE(status.writer);
  REQUIRE(status.readers.size() == 1);
  CHECK(status.readers.front().lease_left);
  CHECK_FALSE(observer->locked("doc"));  // the plain lock of the same name is another lock
}

TEST_CASE("force_unlock_read_write removes the writer and the writer loses its lock", "[inspection]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 900ms; });
  auto operator_service = dlock::test::make_service(redis);
  auto writer = holder->write_lock("doc");
  const std::vector<dlock::RemovedHolder> removed = operator_service->force_unlock_read_write("doc");
  REQUIRE(removed.size() == 1);
  CHECK(removed.front().writer);
  CHECK(removed.front().count == 1);
  CHECK_FALSE(operator_service->read_write_status("doc").held());
  CHECK(operator_service->try_write_lock("doc"));
  CHECK(dlock::test::eventually([&] { return writer.lost(); }));
  CHECK(operator_service->force_unlock_read_write("doc", "no-such-holder").empty());
}

TEST_CASE("semaphore_status counts permits held and force_release_permits returns one holder's", "[inspection]") {
  dlock::test::RedisServer redis;
  auto a = dlock::test::make_service(redis);
  auto b = dlock::test::make_service(redis);
  CHECK_FALSE(a->semaphore_status("pool").exists());
  auto two = a->semaphore("pool", 5).acquire(2);
  auto one = b->semaphore("pool", 5).acquire(1);

  const dlock::SemaphoreStatus status = a->semaphore_status("pool");
  CHECK(status.permits == 5);
  CHECK(status.in_use == 3);
  REQUIRE(status.holders.size() == 2);
  const auto of_b = std::find_if(status.holders.begin(), status.holders.end(),
                                 [](const dlock::LockHolder& h) { return h.hold_count == 1; });
  REQUIRE(of_b != status.holders.end());

  const std::vector<dlock::RemovedHolder> removed = a->force_release_permits("pool", of_b->owner);
  REQUIRE(removed.size() == 1);
  CHECK(removed.front().owner == of_b->owner);
  CHECK(removed.front().count == 1);
  CHECK_FALSE(removed.front().writer);
  CHECK(a->semaphore_status("pool").in_use == 2);
}
