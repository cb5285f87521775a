// A holder process that dies without releasing: its lock expires after its
// lease because nobody renews it any more.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("a holder process killed with SIGKILL frees the lock after its lease", "[crash]") {
  dlock::test::RedisServer redis;
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  // Fork before this process starts any thread of its own.
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 1500ms; });
      auto guard = service->lock("crash");
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

  auto service = dlock::test::make_service(redis);
  // Alive, the holder's watchdog keeps the lock well past its 1.5 s lease.
  std::this_thread::sleep_for(2000ms);
  CHECK_FALSE(service->try_lock("crash"));

  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  auto killed_at = std::chrono::steady_clock::now();
  auto guard = service->lock("crash", {.wait = 10s});
  CHECK(guard);
  // Freed by expiry, no sooner than the lease left could allow and not much later than the lease.
  CHECK(dlock::test::elapsed_ms(killed_at) < 1500 + 2000);
}
