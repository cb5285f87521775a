// A final release that repeats itself through a passing state (here BUSY)
// does not keep the local waiter it offered the lock to asleep: the offer
// stands for one try, then the waiter tries by itself within its own wait
// (a review found it asleep for the whole validity of the releaser's hold).
#include <catch2/catch.hpp>

#include <atomic>
#include <iostream>
#include <thread>

#include "fault_tools.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

using dlock::test::run_long_script;

TEST_CASE("review: a waiter offered the lock by a release that waits out BUSY returns within its wait",
          "[transient]") {
  dlock::test::RedisServer redis({"--busy-reply-threshold", "100"});
  // connect 1000 ms, command 1000 ms (RedisServer::config)
  auto service = dlock::test::make_service(redis);
  const dlock::Config config = redis.config();
  auto holder = service->lock("offer", {.lease = 12s});
  REQUIRE(holder);

  std::atomic<long long> waiter_ms{-1};
  std::string outcome;
  std::thread waiter([&] {
    const auto began = std::chrono::steady_clock::now();
    try {
      auto guard = service->lock("offer", {.wait = 1500ms});
      outcome = guard ? "granted" : "empty guard";
    } catch (const std::exception& e) {
      outcome = std::string("threw: ") + e.what();
    }
    waiter_ms = dlock::test::elapsed_ms(began);
  });
  REQUIRE(dlock::test::await_line(redis, "offer", 1, 200ms));

  std::thread script = run_long_script(redis, 7);  // Redis answers BUSY for ~7 s
  const auto released_at = std::chrono::steady_clock::now();
  std::string release_outcome = "ok";
  try {
    holder.unlock();
  } catch (const std::exception& e) {
    release_outcome = e.what();
  }
  const long long release_ms = dlock::test::elapsed_ms(released_at);
  waiter.join();
  script.join();
  std::cout << "offer_wait: release took " << release_ms << " ms (" << release_outcome << "); waiter with "
            << "wait 1500 ms returned after " << waiter_ms.load() << " ms: " << outcome << "\n";
  // The documented bound: the wait plus the releaser's pool wait, connect and command timeouts.
  const long long bound = 1500 + config.redis.connect_timeout.count() + config.redis.command_timeout.count() +
                          config.redis.command_timeout.count() + 500 /* slack */;
  CHECK(waiter_ms.load() <= bound);
}
