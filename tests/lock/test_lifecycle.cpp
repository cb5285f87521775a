// The end of a lock's owner: a process asked to stop with SIGTERM, a service
// object destroyed while its guards live on or while a thread waits in lock().
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "fault_tools.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("SIGTERM to a process holding locks unwinds its guards and frees the locks at once", "[lifecycle]") {
  dlock::test::RedisServer redis;
  int out[2];
  REQUIRE(::pipe(out) == 0);
  dlock::test::Child holder({TERM_HOLDER_BIN, "--port", std::to_string(redis.port()), "--lease-ms", "30000"}, out[1]);
  ::close(out[1]);
  std::string line;
  char c = 0;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  REQUIRE(line == "ready");
  REQUIRE(redis.run({"HVALS", "dlock:{term:a}"}) == "2");
  REQUIRE(redis.run({"EXISTS", "dlock:{term:b}"}) == "1");

  auto other = dlock::test::make_service(redis);
  const auto sent = std::chrono::steady_clock::now();
  holder.signal(SIGTERM);
  auto status = holder.wait_for(10s);
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 0);
  // Released by the guards, long before the 30 s lease could have run out.
  CHECK(redis.run({"EXISTS", "dlock:{term:a}"}) == "0");
  CHECK(redis.run({"EXISTS", "dlock:{term:b}"}) == "0");
  CHECK(dlock::test::elapsed_ms(sent) < 5000);
  CHECK(other->try_lock("term:a"));
  CHECK(other->try_lock("term:b"));
}

TEST_CASE("guards outliving their service keep their locks renewed past the lease, then release them",
          "[lifecycle]") {
  dlock::test::RedisServer redis;
  dlock::LockGuard outer, inner;
  {
    auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 400ms; });
    outer = service->lock("orphan");
    inner = service->lock("orphan");
  }
  std::this_thread::sleep_for(1500ms);  // more than three leases
  CHECK(outer);
  CHECK(inner);
  CHECK(redis.run({"EXISTS", "dlock:{orphan}"}) == "1");
  inner.unlock();
  CHECK(redis.run({"HVALS", "dlock:{orphan}"}) == "1");
  outer.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{orphan}"}) == "0");
}

TEST_CASE("a guard outliving its service is told when its lock is lost", "[lifecycle]") {
  dlock::test::RedisServer redis;
  dlock::LockGuard guard;
  {
    auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 600ms; });
    guard = service->lock("orphan-lost");
  }
  redis.run({"DEL", "dlock:{orphan-lost}"});
  CHECK(dlock::test::eventually([&] { return guard.lost(); }, 3000ms));
  CHECK(guard.stop_token().stop_requested());
  CHECK_THROWS_AS(guard.unlock(), dlock::LockLostError);
}

TEST_CASE("dropping the last shared_ptr of a service while another thread waits in lock() with its own copy is safe",
          "[lifecycle]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto held = holder->lock("busy");
  auto service = dlock::test::make_service(redis);
  std::atomic<bool> got{false};
  std::string error;
  std::thread waiter([copy = service, &got, &error]() mutable {
    try {
      auto guard = copy->lock("busy", {.wait = 10s});
      got = static_cast<bool>(guard);
    } catch (const std::exception& e) {
      error = e.what();
    }
    copy.reset();  // the waiter's copy was the last one: the service ends here, on this thread
  });
  std::this_thread::sleep_for(300ms);
  service.reset();
  held.unlock();
  waiter.join();
  INFO(error);
  CHECK(got);
  CHECK(redis.run({"EXISTS", "dlock:{busy}"}) == "0");
}

// A waiter keeps the service's internals alive for as long as it waits (run
// under ASan and TSan by the sanitizer variants of the test command).
TEST_CASE("destroying a service while a thread waits in lock() through a plain reference", "[lifecycle]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 1000ms; });
  auto held = holder->lock("busy");
  auto service = dlock::test::make_service(redis);
  dlock::RedisLockService& plain = *service;
  std::string outcome = "none";
  std::thread waiter([&] {
    try {
      auto guard = plain.lock("busy", {.wait = 5s});
      outcome = guard ? "got" : "empty";
    } catch (const std::exception& e) {
      outcome = e.what();
    }
  });
  std::this_thread::sleep_for(300ms);
  service.reset();  // ends the service while the waiter sleeps inside it
  held.unlock();
  waiter.join();
  INFO(outcome);
  CHECK(outcome == "got");
}
