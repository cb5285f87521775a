// A service whose Sentinels and master all
// stopped answering is destroyed within a bounded time (its tracker may be
// asking the frozen Sentinels one after the other, each for a command timeout).
#include <catch2/catch.hpp>

#include <iostream>
#include <thread>

#include "sentinel_topology.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("review: a service is destroyed in bounded time while every Sentinel and the master are frozen",
          "[sentinel][review]") {
  dlock::test::SentinelTopology deployment;
  auto service = dlock::make_lock_service(deployment.config());
  auto held = service->lock("job", {.wait = 2s});
  REQUIRE(held);
  dlock::test::RedisServer& master = deployment.master();
  for (const auto& sentinel : deployment.sentinels()) sentinel->freeze();
  master.freeze();
  try {
    (void)service->try_lock("probe");  // times out: the tracker is told to look again
  } catch (const dlock::Error&) {
  }
  std::this_thread::sleep_for(300ms);  // the tracker is asking the frozen Sentinels now
  held.detach();
  held = dlock::LockGuard();  // the guard keeps the service's core alive
  const auto start = std::chrono::steady_clock::now();
  service.reset();
  const long long ms = dlock::test::elapsed_ms(start);
  std::cout << "review shutdown: the service was destroyed in " << ms << " ms (command timeout 1000 ms, 3 Sentinels)\n";
  for (const auto& sentinel : deployment.sentinels()) sentinel->thaw();
  for (const auto& server : deployment.servers()) server->thaw();
  CHECK(ms < 10000);
}
