// A holder process that dies without releasing: its lock expires after its
// lease because nobody renews it any more. So for every primitive: a lock, a
// multi-lock, a read-write lock's reader and writer, a semaphore's permits.
#include <catch2/catch.hpp>

#include <thread>

#include "forked_holder.hpp"

using namespace std::chrono_literals;

using dlock::RedisLockService;
using dlock::test::kill_holder;

namespace {

// A child process holding what `take` returns, renewed (1.5 s lease) until killed.
template <typename Take>
pid_t fork_holding(const dlock::test::RedisServer& redis, Take take) {
  const pid_t child = dlock::test::fork_holder(
      redis, 1500ms, [take](RedisLockService& s, const dlock::test::ReadySignal&) { return dlock::test::keep(take(s)); });
  REQUIRE(child > 0);
  return child;
}

}  // namespace

TEST_CASE("a holder process killed with SIGKILL frees the lock after its lease", "[crash]") {
  dlock::test::RedisServer redis;
  const pid_t child = fork_holding(redis, [](RedisLockService& s) { return s.lock("crash"); });

  auto service = dlock::test::make_service(redis);
  // Alive, the holder's watchdog keeps the lock well past its 1.5 s lease.
  std::this_thread::sleep_for(2000ms);
  CHECK_FALSE(service->try_lock("crash"));

  auto killed_at = kill_holder(child);
  auto guard = service->lock("crash", {.wait = 10s});
  CHECK(guard);
  // Freed by expiry, no sooner than the lease left could allow and not much later than the lease.
  CHECK(dlock::test::elapsed_ms(killed_at) < 1500 + 2000);
}

TEST_CASE("a SIGKILLed holder of a multi-lock, a read or write lock, or permits frees them after the lease",
          "[crash][multi][rwlock][semaphore]") {
  dlock::test::RedisServer redis;
  const pid_t multi = fork_holding(redis, [](RedisLockService& s) { return s.lock_all({"c:1", "c:2"}); });
  const pid_t writer = fork_holding(redis, [](RedisLockService& s) { return s.write_lock("c:rw"); });
  const pid_t reader = fork_holding(redis, [](RedisLockService& s) { return s.read_lock("c:ro"); });
  const pid_t permits = fork_holding(redis, [](RedisLockService& s) { return s.semaphore("c:sem", 3).acquire(3); });

  auto service = dlock::test::make_service(redis);
  // Alive, the holders' watchdogs keep everything well past the 1.5 s lease.
  std::this_thread::sleep_for(2000ms);
  CHECK_FALSE(service->try_lock("c:2"));
  CHECK_FALSE(service->try_read_lock("c:rw"));
  CHECK_FALSE(service->try_write_lock("c:ro"));
  CHECK(service->try_read_lock("c:ro"));  // readers share
  CHECK_FALSE(service->semaphore("c:sem").try_acquire());

  for (const pid_t child : {multi, writer, reader, permits}) kill_holder(child);
  const auto killed_at = std::chrono::steady_clock::now();
  CHECK(service->lock_all({"c:1", "c:2"}, {.wait = 10s}));
  CHECK(service->read_lock("c:rw", {.wait = 10s}));
  CHECK(service->write_lock("c:ro", {.wait = 10s}));
  CHECK(service->semaphore("c:sem").acquire(3, {.wait = 10s}));
  CHECK(dlock::test::elapsed_ms(killed_at) < 1500 + 2000);
}
