// Review E: "one set of rules for every primitive" attacked (the read-write
// lock and the semaphore keep the lock's rules: an index entry gone is a lost
// hold, a release that finds its hold gone is never a silent success). Each
// case reproduces a defect, failing on the code it was written against.
// Tag [review].
#include <catch2/catch.hpp>

#include <string>
#include <thread>

#include "fault_tools.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

namespace {

auto quiet = [](dlock::Config& c) { c.logging.level = "off"; };

}  // namespace

// --- Defect 1 ---------------------------------------------------------------
// A permit holder's index entry (dlock:{K}:semaphore:holders) gone -- deleted,
// evicted -- is a lost hold: acquire no longer counts it, so another holder
// is let in beside it (two holders of a 1-permit semaphore), and the renew
// script says so at the next renewal. But the final release (record_release.lua)
// checks only the record, never the index membership: the holder whose hold
// was counted out is told "released", a loss never reported. A fixed lease
// (no renewals at all) makes it certain; with the watchdog it holds for any
// release before the next renewal (a third of a lease).
TEST_CASE("review E: a permit counted out of the index, another let in beside it, is reported lost at its release",
          "[review][semaphore][eviction]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, quiet);
  auto other = dlock::test::make_service(redis, quiet);
  auto permit = service->semaphore("counted-out", 1).acquire(1, {.lease = 20s});
  REQUIRE(permit);
  REQUIRE(redis.run({"DEL", "dlock:{counted-out}:semaphore:holders"}) == "1");  // as an eviction would
  // The hold no longer counts: a second holder of a one-permit semaphore.
  auto intruder = other->semaphore("counted-out", 1).try_acquire(1);
  REQUIRE(intruder);
  // The first holder overlapped another: its release must say so, as the lock's does when its hold is gone.
  CHECK_THROWS_AS(permit.unlock(), dlock::LockLostError);  // failed: unlock() returned normally
  CHECK(permit.lost());                                     // failed: false
}

// --- Defect 1, the reader's row -------------------------------------------------
// The same for a reader whose index entry (dlock:{K}:rw:readers) is gone: a
// writer is granted beside it, and the reader's release says "released".
TEST_CASE("review E: a reader counted out of the index, a writer let in beside it, is reported lost at its release",
          "[review][rwlock][eviction]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, quiet);
  auto other = dlock::test::make_service(redis, quiet);
  auto reader = service->read_lock("counted-out", {.lease = 20s});
  REQUIRE(reader);
  REQUIRE(redis.run({"DEL", "dlock:{counted-out}:rw:readers"}) == "1");
  auto writer = other->try_write_lock("counted-out");
  REQUIRE(writer);  // a writer beside a reader that still holds its record
  CHECK_THROWS_AS(reader.unlock(), dlock::LockLostError);  // failed: unlock() returned normally
  CHECK(reader.lost());                                     // failed: false
}

// --- Defect 1, with the watchdog -------------------------------------------------
// The same schedule with a renewed lease: the index entry vanishes between two
// renewals, and the holder releases before the next one. The renew script
// would have said "lost"; the release says "released".
TEST_CASE("review E: a renewed permit counted out of the index and released before the next renewal is reported lost",
          "[review][semaphore][eviction][watchdog]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.lock.watchdog_timeout = 30s;  // renewed every 10 s: none during the test
    c.logging.level = "off";
  });
  auto other = dlock::test::make_service(redis, quiet);
  auto permit = service->semaphore("renewed", 1).acquire();
  REQUIRE(permit);
  REQUIRE(redis.run({"SREM", "dlock:{renewed}:semaphore:holders", redis.run({"SMEMBERS",
                                                                             "dlock:{renewed}:semaphore:holders"})}) ==
          "1");
  REQUIRE(other->semaphore("renewed", 1).try_acquire(1));
  CHECK_THROWS_AS(permit.unlock(), dlock::LockLostError);  // failed: unlock() returned normally
}
