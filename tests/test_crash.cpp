// A holder process that dies without releasing: its lock expires after its
// lease because nobody renews it any more. So for every primitive: a lock, a
// multi-lock, a read-write lock's reader and writer, a semaphore's permits.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <memory>

#include "services.hpp"

using namespace std::chrono_literals;

namespace {

// Forks a child that takes something with `take` (a service with a 1.5 s
// lease, renewed while it lives) and holds it until killed; returns its pid
// once it holds it. Call before this process starts any thread of its own.
pid_t fork_holder(const dlock::test::RedisServer& redis,
                  const std::function<std::shared_ptr<void>(dlock::RedisLockService&)>& take) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 1500ms; });
      auto held = take(*service);
      char byte = 'L';
      if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
      for (;;) ::pause();
    } catch (...) {
      ::_exit(1);
    }
  }
  ::close(ready[1]);
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  return child;
}

template <typename Guard>
std::shared_ptr<void> keep(Guard guard) {
  return std::make_shared<Guard>(std::move(guard));
}

// Kills `child` and returns when it was killed.
std::chrono::steady_clock::time_point kill_holder(pid_t child) {
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  return std::chrono::steady_clock::now();
}

}  // namespace

TEST_CASE("a holder process killed with SIGKILL frees the lock after its lease", "[crash]") {
  dlock::test::RedisServer redis;
  const pid_t child = fork_holder(redis, [](dlock::RedisLockService& s) { return keep(s.lock("crash")); });

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
  const pid_t multi = fork_holder(redis, [](dlock::RedisLockService& s) { return keep(s.lock_all({"c:1", "c:2"})); });
  const pid_t writer = fork_holder(redis, [](dlock::RedisLockService& s) { return keep(s.write_lock("c:rw")); });
  const pid_t reader = fork_holder(redis, [](dlock::RedisLockService& s) { return keep(s.read_lock("c:ro")); });
  const pid_t permits =
      fork_holder(redis, [](dlock::RedisLockService& s) { return keep(s.semaphore("c:sem", 3).acquire(3)); });

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
