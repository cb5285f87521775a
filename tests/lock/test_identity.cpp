// Every first acquisition has an identity of its own in Redis, while re-entry
// stays per thread: a retried call is told apart from a new one, a detached
// lock from the same thread's next acquisition, a renewal in flight from a
// later acquisition. Timeouts are produced with DEBUG SLEEP (the server runs
// the queued command when it wakes) or a proxy that swallows a command.
#include <catch2/catch.hpp>

#include <thread>

#include "dlock/scripts.hpp"
#include "fault_tools.hpp"
#include "services.hpp"
#include "tcp_proxy.hpp"

using namespace std::chrono_literals;

namespace {

auto short_command_timeout(dlock::Config& c) { c.redis.command_timeout = 300ms; }

}  // namespace

TEST_CASE("a re-entrant lock whose try timed out counts its hold once, and the outer release frees the lock",
          "[identity][ambiguous]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, short_command_timeout);
  auto outer = service->lock("re");

  std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
  auto inner = service->lock("re", {.wait = 5s});  // its first try times out, runs late, and is tried again
  sleeper.join();
  REQUIRE(inner);
  CHECK(service->hold_count("re") == 2);
  CHECK(redis.run({"HVALS", "dlock:{re}"}) == "2");
  inner.unlock();
  CHECK(redis.run({"HVALS", "dlock:{re}"}) == "1");
  outer.unlock();
  // Freed by its outermost release, at once, not a lease later.
  CHECK(redis.run({"EXISTS", "dlock:{re}"}) == "0");
  CHECK(service->hold_count("re") == 0);
}

TEST_CASE("a first acquire whose try timed out is adopted by its own retry, counted once", "[identity][ambiguous]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, short_command_timeout);

  std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
  auto guard = service->lock("first", {.wait = 5s});
  sleeper.join();
  REQUIRE(guard);
  CHECK(redis.run({"HLEN", "dlock:{first}"}) == "1");
  CHECK(redis.run({"HVALS", "dlock:{first}"}) == "1");
  // The token the late try drew, handed out once.
  CHECK(redis.run({"GET", "dlock:{first}:fence"}) == std::to_string(guard.fencing_token()));
  guard.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{first}"}) == "0");
}

TEST_CASE("a detached lock is held against its own thread until its lease ends, and is never freed by it",
          "[identity][detach]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto job = service->lock("job", {.lease = 1500ms});
  const std::uint64_t job_token = job.fencing_token();
  job.detach();

  const auto detached_at = std::chrono::steady_clock::now();
  CHECK_FALSE(service->try_lock("job"));
  CHECK_FALSE(service->try_lock("job", {.wait = 300ms}));
  CHECK_THROWS_AS(service->lock("job", {.wait = 200ms}), dlock::LockTimeoutError);
  CHECK(redis.run({"EXISTS", "dlock:{job}"}) == "1");  // the detached hold is still there, untouched

  // Once its lease ends the same thread gets it, with a new, greater token.
  auto again = service->lock("job", {.wait = 5s});
  REQUIRE(again);
  CHECK(dlock::test::elapsed_ms(detached_at) >= 1000);
  CHECK(again.fencing_token() > job_token);
}

TEST_CASE("a detached inner hold keeps the lock after the outer release, until its lease ends", "[identity][detach]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  auto outer = service->lock("nest", {.lease = 1200ms});
  service->lock("nest", {.lease = 1200ms}).detach();
  outer.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{nest}"}) == "1");
  CHECK_FALSE(other->try_lock("nest"));
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{nest}"}) == "0"; }, 3000ms));
}

TEST_CASE("after a release that never reached Redis, the same thread's next lock waits and draws a new token",
          "[identity][ambiguous]") {
  dlock::test::RedisServer redis;
  dlock::test::TcpProxy proxy(redis.port());
  auto service = dlock::test::make_service(redis, [&](dlock::Config& c) {
    c.redis.port = proxy.port();
    c.redis.command_timeout = 300ms;
  });
  auto guard = service->lock("swallowed", {.lease = 1500ms});
  const std::uint64_t first = guard.fencing_token();
  proxy.blackhole_existing();  // the release is swallowed on its way
  CHECK_THROWS_AS(guard.unlock(), dlock::ConnectionError);
  CHECK(redis.run({"EXISTS", "dlock:{swallowed}"}) == "1");

  // Not adopted as if it were this call's: it waits for the old hold's lease like anyone.
  auto again = service->lock("swallowed", {.wait = 5s});
  REQUIRE(again);
  CHECK(again.fencing_token() > first);
}

TEST_CASE("a lock() that failed after its try reached Redis leaves no hold in the way of the thread's next lock()",
          "[identity][ambiguous]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.command_timeout = 300ms;
    c.lock.watchdog_timeout = 20000ms;
  });
  std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
  CHECK_THROWS_AS(service->lock("orphan"), dlock::ConnectionError);
  sleeper.join();
  REQUIRE(redis.run({"EXISTS", "dlock:{orphan}"}) == "1");  // the failed try ran after all
  const std::string left = redis.run({"HKEYS", "dlock:{orphan}"});

  // That grant was never handed to anyone: the thread's next lock() takes it over at once.
  auto guard = service->lock("orphan");
  REQUIRE(guard);
  CHECK(redis.run({"HKEYS", "dlock:{orphan}"}) == left);
  CHECK(redis.run({"HVALS", "dlock:{orphan}"}) == "1");
  guard.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{orphan}"}) == "0");
}

TEST_CASE("a renewal sent for an earlier acquisition never extends the thread's later one", "[identity][watchdog]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto first = service->lock("renew");
  const std::string first_id = redis.run({"HKEYS", "dlock:{renew}"});
  first.unlock();
  auto later = service->lock("renew", {.lease = 800ms});
  CHECK(redis.run({"HKEYS", "dlock:{renew}"}) != first_id);
  // The watchdog's renewal of the first acquisition, arriving late.
  const std::string renew = dlock::detail::kRenewScript.source;
  CHECK(redis.run({"EVAL", renew, "1", "dlock:{renew}", first_id, "30000"}) == "0");
  CHECK(std::stoll(redis.run({"PTTL", "dlock:{renew}"})) <= 800);
}

TEST_CASE("every grant that is not a re-entry draws a new, greater fencing token", "[identity][fencing]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto guard = service->lock("seq");
    auto inner = service->lock("seq");
    CHECK(inner.fencing_token() == guard.fencing_token());
    CHECK(guard.fencing_token() > last);
    last = guard.fencing_token();
  }
}

TEST_CASE("a child process refuses to use a service made before fork(), and never takes the parent's lock",
          "[identity][fork]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("parent");
  const pid_t child = ::fork();
  if (child == 0) {
    // In the child: every call must throw dlock::Error before touching a socket or a lock.
    int code = 0;
    try {
      auto stolen = service->try_lock("parent");
      code = stolen ? 2 : 3;
    } catch (const dlock::Error&) {
    }
    try {
      service->lock("other");
      code = code ? code : 4;
    } catch (const dlock::Error&) {
    }
    ::_exit(code);
  }
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // The parent's lock and connections are untouched.
  CHECK(guard);
  CHECK(redis.run({"HVALS", "dlock:{parent}"}) == "1");
  guard.unlock();
  CHECK(service->try_lock("other"));
}

TEST_CASE("a grant adopted after its fencing counter expired gets a new, greater token", "[identity][fencing][orphan]") {
  // The counter's expiry is set when it is seeded (INCR keeps it), so it can
  // expire while a grant nobody was handed sits in Redis: adoption draws anew.
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.command_timeout = 300ms;
    c.lock.watchdog_timeout = 8000ms;
    c.lock.fence_retention = 1500ms;
  });
  std::uint64_t first = 0;
  {
    auto g = service->lock("fence-orphan");
    REQUIRE(g);
    first = g.fencing_token();
  }
  std::thread sleeper = dlock::test::sleep_redis(redis, "0.8");
  CHECK_THROWS_AS(service->lock("fence-orphan"), dlock::ConnectionError);
  sleeper.join();
  REQUIRE(redis.run({"EXISTS", "dlock:{fence-orphan}"}) == "1");  // the timed-out acquire ran: an orphan grant
  // The counter, seeded by the first acquisition, expires (INCR did not extend it).
  REQUIRE(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{fence-orphan}:fence"}) == "0"; }, 3000ms));

  auto adopted = service->lock("fence-orphan");
  REQUIRE(adopted);
  INFO("first token " << first << ", adopted token " << adopted.fencing_token());
  CHECK(adopted.fencing_token() > first);
}

TEST_CASE("an adopted grant takes exactly the adopter's lease, however long the lost try's was", "[identity][orphan][lease]") {
  // The adopter's local validity is its 300 ms fixed lease: Redis must not keep
  // the lock for the lost try's 10 s watchdog lease after that.
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.command_timeout = 300ms;
    c.lock.watchdog_timeout = 10000ms;
  });
  std::thread sleeper = dlock::test::sleep_redis(redis, "0.8");
  CHECK_THROWS_AS(service->lock("lease-orphan"), dlock::ConnectionError);
  sleeper.join();
  REQUIRE(redis.run({"EXISTS", "dlock:{lease-orphan}"}) == "1");

  auto guard = service->lock("lease-orphan", {.lease = 300ms});
  REQUIRE(guard);
  INFO("PTTL after adopting with a 300 ms fixed lease: " << redis.run({"PTTL", "dlock:{lease-orphan}"}));
  // The holder's fixed lease ran out; it releases.
  std::this_thread::sleep_for(500ms);
  try {
    guard.unlock();
  } catch (const dlock::LockLostError&) {
  }
  // A fixed lease of 300 ms: anyone may have the lock by now.
  auto other = dlock::test::make_service(redis);
  auto taken = other->try_lock("lease-orphan", {.wait = 1500ms});
  CHECK(taken);
}

TEST_CASE("a grant that arrived already expired by the holder's clock is freed by its release, not a lease later",
          "[identity][fault]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.command_timeout = 3000ms;
    c.lock.watchdog_timeout = 800ms;
  });
  // Redis stands still for longer than the lease while the acquire waits for its reply.
  redis.freeze();
  std::thread thaw([&redis] {
    std::this_thread::sleep_for(1200ms);
    redis.thaw();
  });
  auto guard = service->lock("late", {.wait = 5s});
  thaw.join();
  CHECK(guard.lost());  // its lease ran out by its own clock before it even learnt of it
  REQUIRE(redis.run({"EXISTS", "dlock:{late}"}) == "1");  // while Redis granted it a full lease just now
  CHECK_THROWS_AS(guard.unlock(), dlock::LockLostError);
  CHECK(redis.run({"EXISTS", "dlock:{late}"}) == "0");
}
