// Redis answers "not now" while it loads its dataset after a restart
// (LOADING) or runs a long script (BUSY): lock() waits that out within its
// wait, as it waits out an outage, and names the state if the wait ends in it.
// A thread re-entering its lock while a guard it moved to another thread is
// released there waits for that release only within its wait, and never
// fails for an ordinary one.
#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "fault_tools.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

using dlock::test::run_long_script;

TEST_CASE("lock() waits out a Redis busy with a long script within its wait", "[fault][transient]") {
  dlock::test::RedisServer redis({"--busy-reply-threshold", "100"});
  auto service = dlock::test::make_service(redis);
  std::thread script = run_long_script(redis, 2);
  auto guard = service->lock("busy", {.wait = 8s});
  script.join();
  CHECK(guard);
  CHECK(redis.run({"EXISTS", "dlock:{busy}"}) == "1");
}

TEST_CASE("a wait that ends while Redis is busy says so", "[fault][transient]") {
  dlock::test::RedisServer redis({"--busy-reply-threshold", "100"});
  auto service = dlock::test::make_service(redis);
  std::thread script = run_long_script(redis, 2);
  CHECK_THROWS_WITH(service->lock("busy", {.wait = 500ms}), Catch::Contains("BUSY") && Catch::Contains("'busy'"));
  script.join();
}

TEST_CASE("lock() waits out a restarted Redis loading its dataset within its wait", "[fault][transient]") {
  // Each key takes 200 µs to load: 15,000 keys keep the server LOADING for about 3 s, and it answers
  // clients (with LOADING) every KiB it reads.
  dlock::test::RedisServer redis({"--enable-debug-command", "yes", "--key-load-delay", "200",
                                  "--loading-process-events-interval-bytes", "1024"});
  auto service = dlock::test::make_service(redis);
  REQUIRE(redis.run({"DEBUG", "POPULATE", "15000"}) == "OK");
  REQUIRE(redis.run({"SAVE"}) == "OK");
  redis.stop();
  redis.start();
  REQUIRE_THAT(redis.run({"GET", "any"}), Catch::StartsWith("LOADING"));
  auto guard = service->lock("loading", {.wait = 15s});
  CHECK(guard);
  CHECK(redis.run({"EXISTS", "dlock:{loading}"}) == "1");
}

TEST_CASE("a thread re-entering while a guard it gave away is released through BUSY waits no longer than its wait",
          "[fault][transient][reentry]") {
  dlock::test::RedisServer redis({"--busy-reply-threshold", "100"});
  auto service = dlock::test::make_service(redis);
  auto outer = service->lock("given");
  auto inner = service->lock("given");  // re-entered: this guard goes to another thread
  std::thread script = run_long_script(redis, 5);
  // The other thread's release repeats through BUSY (the hold is valid) and owns the hold's round trips meanwhile.
  std::atomic<bool> released{false};
  std::thread releaser([moved = std::move(inner), &released]() mutable {
    try {
      moved.unlock();
      released = true;
    } catch (const dlock::Error&) {
      // Checked below, on the test's thread.
    }
  });
  std::this_thread::sleep_for(500ms);

  // Not granted after the script: refused when this caller's wait ends (a try: once the other thread's usual
  // round trip is overdue), saying why.
  CHECK_THROWS_AS(service->lock("given", {.wait = 300ms}), dlock::LockTimeoutError);
  CHECK_THROWS_WITH(service->lock("given", {.wait = 300ms}), Catch::Contains("another thread"));
  CHECK_FALSE(service->try_lock("given"));
  releaser.join();
  script.join();
  CHECK(released);

  // Once the release went through, re-entry works again, and the outer hold was kept all along.
  auto again = service->lock("given", {.wait = 2s});
  CHECK(again);
  CHECK(outer);
  again.unlock();
  outer.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{given}"}) == "0");
}

TEST_CASE("review: try_lock re-entries racing releases of guards moved to another thread always succeed and keep "
          "Redis' count", "[reentry][review]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto outer = service->lock("race");
  std::mutex m;
  std::condition_variable cv;
  std::deque<dlock::LockGuard> handed;
  bool done = false;
  std::atomic<int> release_errors{0};
  std::thread releaser([&] {
    for (;;) {
      dlock::LockGuard g;
      {
        std::unique_lock lk(m);
        cv.wait(lk, [&] { return done || !handed.empty(); });
        if (handed.empty()) return;
        g = std::move(handed.front());
        handed.pop_front();
      }
      try {
        g.unlock();
      } catch (const dlock::Error&) {
        ++release_errors;
      }
    }
  });
  int failed_tries = 0;
  int thrown = 0;
  for (int i = 0; i < 1000; ++i) {
    try {
      auto g = service->try_lock("race");
      if (!g) {
        ++failed_tries;
        continue;
      }
      std::lock_guard lk(m);
      handed.push_back(std::move(g));
    } catch (const dlock::Error&) {
      ++thrown;
    }
    cv.notify_one();
  }
  {
    std::lock_guard lk(m);
    done = true;
  }
  cv.notify_one();
  releaser.join();
  CHECK(failed_tries == 0);
  CHECK(thrown == 0);
  CHECK(release_errors == 0);
  CHECK(service->hold_count("race") == 1);
  CHECK(redis.run({"HVALS", "dlock:{race}"}) == "1");
  outer.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{race}"}) == "0");
}
