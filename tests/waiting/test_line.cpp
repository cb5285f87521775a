// The line of waiters holds however the lock becomes free: a fixed lease that
// ends, a holder that crashed, a release. Waiters are served in arrival order,
// a live waiter never loses its place, a dead one costs at most one window.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "fault_tools.hpp"
#include "services.hpp"
#include "dlock/scripts.hpp"
#include "admin_connection.hpp"
#include "tcp_proxy.hpp"

using namespace std::chrono_literals;

namespace {

// Eight waiters arrive in a known order, each in line before the next comes;
// each takes the lock with a short fixed lease and never releases it. Returns
// the order in which they got it.
std::vector<int> expiry_order(const dlock::test::RedisServer& redis,
                              const std::vector<std::shared_ptr<dlock::RedisLockService>>& services,
                              const std::string& key) {
  services.front()->lock(key, {.lease = 400ms}).detach();  // the first holder, never released either
  std::mutex mutex;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 8; ++i) {
    auto service = services[static_cast<std::size_t>(i) % services.size()];
    waiters.emplace_back([&, service, i] {
      auto got = service->lock(key, {.wait = 20s, .lease = 300ms});
      {
        std::lock_guard lock(mutex);
        order.push_back(i);
      }
      got.detach();
    });
    REQUIRE(dlock::test::eventually(
        [&] { return redis.run({"ZCARD", "dlock:{" + key + "}:queue"}) == std::to_string(i + 1); }, 5000ms));
  }
  for (auto& waiter : waiters) waiter.join();
  return order;
}

// A service of a Redis user without channel rights: its SUBSCRIBE is refused, never confirmed.
std::shared_ptr<dlock::RedisLockService> waiter_without_channel_rights(const dlock::test::RedisServer& redis,
                                                                      const std::function<void(dlock::Config&)>& tweak) {
  redis.run({"ACL", "SETUSER", "nochannels", "on", ">secret", "resetkeys", "~dlock:*", "resetchannels", "+@all"});
  return dlock::test::make_service(redis, [&](dlock::Config& c) {
    c.redis.username = "nochannels";
    c.redis.password = "secret";
    tweak(c);
  });
}

}  // namespace

TEST_CASE("threads whose fixed leases run out one after another get the lock in arrival order", "[line][expiry]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  for (int run = 0; run < 3; ++run) {
    CHECK(expiry_order(redis, {service}, "threads" + std::to_string(run)) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  }
}

TEST_CASE("service instances whose fixed leases run out one after another get the lock in arrival order",
          "[line][expiry]") {
  dlock::test::RedisServer redis;
  std::vector<std::shared_ptr<dlock::RedisLockService>> services;
  for (int i = 0; i < 8; ++i) services.push_back(dlock::test::make_service(redis));
  for (int run = 0; run < 3; ++run) {
    CHECK(expiry_order(redis, services, "instances" + std::to_string(run)) ==
          std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  }
}

TEST_CASE("a SIGKILLed holder's lock goes to waiters of several processes in arrival order", "[line][crash]") {
  dlock::test::RedisServer redis;
  const std::string port = std::to_string(redis.port());
  dlock::test::Child holder({LINE_MEMBER_BIN, "--port", port, "--key", "crash", "--name", "holder", "--hold"});
  REQUIRE(dlock::test::eventually([&] { return redis.run({"LRANGE", "order:crash", "0", "-1"}) == "holder"; }));
  std::vector<dlock::test::Child> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back(std::vector<std::string>{LINE_MEMBER_BIN, "--port", port, "--key", "crash", "--name",
                                                  "w" + std::to_string(i), "--wait-ms", "20000", "--lease-ms", "300"});
    REQUIRE(dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{crash}:queue"}) == std::to_string(i + 1); }));
  }
  holder.signal(SIGKILL);
  for (auto& waiter : waiters) {
    const auto status = waiter.wait_for(20s);
    REQUIRE(status);
    CHECK(WIFEXITED(*status));
    CHECK(WEXITSTATUS(*status) == 0);
  }
  CHECK(redis.run({"LRANGE", "order:crash", "0", "-1"}) == "holder w0 w1 w2 w3");
}

TEST_CASE("a live waiter whose turn lapsed keeps its place at the head of the line", "[line]") {
  dlock::test::RedisServer redis;
  auto other = dlock::test::make_service(redis);
  // A free lock; at the head a waiter last heard from now (alive for 5 s) that missed its turn's notice.
  const std::string alive_until = std::to_string(dlock::test::server_ms(redis) + 5000);
  redis.run({"ZADD", "dlock:{k}:queue", "1", "late:1"});
  redis.run({"ZADD", "dlock:{k}:alive", alive_until, "late:1"});
  // Nobody else takes it: neither a try once, nor a waiter who came later...
  CHECK_FALSE(other->try_lock("k"));
  CHECK_FALSE(other->try_lock("k", {.wait = 300ms}));
  // ...and the late one is told again that it is its turn.
  CHECK(redis.run({"GET", "dlock:{k}:turn"}) == "late:1");
  CHECK(redis.run({"ZRANGE", "dlock:{k}:queue", "0", "0"}) == "late:1");
}

TEST_CASE("a try without a wait does not barge past a live waiter when the lock's lease runs out", "[line][expiry]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiting = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  holder->lock("k", {.lease = 500ms}).detach();
  std::atomic<bool> waiter_holds{false}, spinning{true};
  auto waiter = std::async(std::launch::async, [&] {
    auto got = waiting->lock("k", {.wait = 5s});
    waiter_holds = static_cast<bool>(got);
    while (spinning) std::this_thread::sleep_for(1ms);
    return static_cast<bool>(got);
  });
  REQUIRE(dlock::test::await_line(redis, "k", 1, 0ms));
  // Spin on try_lock across the expiry, until the waiter holds it: the line's head must get it, never the spinner.
  int barged = 0;
  const auto until = std::chrono::steady_clock::now() + 3000ms;
  while (!waiter_holds && std::chrono::steady_clock::now() < until) {
    if (auto got = other->try_lock("k")) {
      ++barged;
      break;
    }
  }
  spinning = false;
  CHECK(waiter.get());
  CHECK(barged == 0);
}

TEST_CASE("a waiter whose subscription Redis never confirms still returns within its wait", "[line][acl]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto guard = holder->lock("k");
  auto waiter = waiter_without_channel_rights(redis, [](dlock::Config& c) {
    c.redis.command_timeout = 4000ms;  // the old bound of a first waiter
  });
  const auto started = std::chrono::steady_clock::now();
  CHECK_FALSE(waiter->try_lock("k", {.wait = 300ms}));
  // The wait, plus a round trip or two; far from the command timeout.
  CHECK(dlock::test::elapsed_ms(started) < 1500);
}

TEST_CASE("a waiter whose subscription Redis never confirms does not take a lock freed after its wait ran out",
          "[line][acl]") {
  // The subscription's confirmation is awaited until the wait's end (less than a third of this window);
  // the sleep that follows must still end at the deadline, not a whole wait later.
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto guard = holder->lock("k");
  auto waiter = waiter_without_channel_rights(redis, [](dlock::Config& c) { c.lock.turn_window = 60000ms; });
  std::atomic<bool> returned{false};
  auto waiting = std::async(std::launch::async, [&] {
    const bool got = static_cast<bool>(waiter->try_lock("k", {.wait = 4000ms}));
    returned = true;
    return got;
  });
  // Freed two seconds after the waiter's wait ran out: too late for it.
  std::this_thread::sleep_for(6000ms);
  const bool returned_before_release = returned.load();
  guard.unlock();
  CHECK_FALSE(waiting.get());
  CHECK(returned_before_release);
}

TEST_CASE("a waiter whose subscription cannot be made keeps trying every third of a window", "[line][subscriber]") {
  // The subscriber cannot connect (maxclients reached; commands on the already
  // open pooled connection still work): the waiter must not wait for it.
  dlock::test::RedisServer redis;
  dlock::test::AdminConnection admin(redis);
  auto holder = dlock::test::make_service(redis);
  auto waiter = dlock::test::make_service(redis);
  {
    auto warm = waiter->lock("warm-up", {.lease = 1000ms});  // the waiter's pooled connection is open
  }
  // And idle again: a destructor does not wait for its release's reply, whose connection is back once it is read.
  REQUIRE(dlock::test::eventually([&] { return waiter->stats().released >= 1; }));
  auto held = holder->lock("unconfirmed", {.lease = 600ms});  // runs out by itself: nobody publishes
  REQUIRE(held);
  REQUIRE(admin.run({"CONFIG", "SET", "maxclients", std::to_string(dlock::test::connected_clients(admin))}) == "OK");

  const auto called = std::chrono::steady_clock::now();
  auto got = waiter->try_lock("unconfirmed", {.wait = 5000ms, .lease = 2000ms});
  const long long took = dlock::test::elapsed_ms(called);
  admin.run({"CONFIG", "SET", "maxclients", "10000"});
  CHECK(got);
  // The lock was free after ~600 ms; a waiter re-tries at least every turn_window/3 (333 ms).
  CHECK(took < 2000);
}

TEST_CASE("a waiter on a slow link re-confirms its place in time and gets the lock before a later waiter",
          "[line][fault]") {
  // 550 ms each way to Redis; a window of 3 s: a waiter re-confirms its place at least every third of it
  // (plus its round trip), and is taken for dead only if not heard from for the whole window.
  dlock::test::RedisServer redis;
  dlock::test::TcpProxy proxy(redis.port());
  const auto window = [](dlock::Config& c) { c.lock.turn_window = 3000ms; };
  auto holder = dlock::test::make_service(redis, window);
  auto later = dlock::test::make_service(redis, window);
  auto slow = dlock::test::make_service(redis, [&](dlock::Config& c) {
    window(c);
    c.redis.port = proxy.port();
    c.redis.command_timeout = 5000ms;
    c.redis.connect_timeout = 5000ms;
  });
  {
    // Its pooled and subscriber connections open, its scripts loaded, before the link slows down.
    auto warm = holder->lock("warm-up");
    CHECK_FALSE(slow->try_lock("warm-up", {.wait = 300ms}));
  }
  auto guard = holder->lock("k");
  proxy.set_delay(550);

  std::mutex mutex;
  std::vector<std::string> order;
  auto take = [&](const std::shared_ptr<dlock::RedisLockService>& service, const std::string& name) {
    return std::async(std::launch::async, [&, service, name] {
      auto got = service->try_lock("k", {.wait = 20s});
      std::lock_guard lock(mutex);
      order.push_back(got ? name : name + " timed out");
    });
  };
  auto slow_waiting = take(slow, "slow");
  REQUIRE(dlock::test::await_line(redis, "k", 1, 0ms));
  const std::string slow_id = redis.run({"ZRANGE", "dlock:{k}:queue", "0", "0"});
  const std::string first_deadline = redis.run({"ZSCORE", "dlock:{k}:alive", slow_id});
  auto later_waiting = take(later, "later");
  REQUIRE(dlock::test::await_line(redis, "k", 2, 0ms));
  // Released once the slow waiter re-confirmed its place, or once its first deadline passed without that.
  REQUIRE(dlock::test::eventually(
      [&] {
        return redis.run({"ZSCORE", "dlock:{k}:alive", slow_id}) != first_deadline ||
               dlock::test::server_ms(redis) > std::stoll(first_deadline);
      },
      10000ms));
  guard.unlock();
  slow_waiting.get();
  later_waiting.get();
  CHECK(order == std::vector<std::string>{"slow", "later"});
}

TEST_CASE("waiters keep their places when the server, not they, stood still for longer than a window",
          "[line][fault]") {
  // As a freeze, a long script or a restart leaves the line: every deadline passed while nobody
  // could be heard, and the line was last heard from 1.5 windows ago.
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto guard = holder->lock("k");
  const long long now = dlock::test::server_ms(redis);
  redis.run({"ZADD", "dlock:{k}:queue", "1", "first:1", "2", "second:1"});
  redis.run({"ZADD", "dlock:{k}:alive", std::to_string(now - 500), "first:1", std::to_string(now - 500), "second:1",
             std::to_string(now - 1500), ""});
  guard.unlock();
  // The release gives every waiter one more window and hands the turn to the first.
  CHECK(redis.run({"GET", "dlock:{k}:turn"}) == "first:1");
  CHECK(redis.run({"ZRANGE", "dlock:{k}:queue", "0", "-1"}) == "first:1 second:1");
  CHECK(std::stoll(redis.run({"ZSCORE", "dlock:{k}:alive", "second:1"})) > now);
}

TEST_CASE("after the server stood still, a newcomer that waits does not barge past the line", "[line][fault]") {
  // The line as a freeze leaves it: both waiters' deadlines passed while nobody could be heard, the line
  // was last heard from 1.5 windows ago, and the lock is free. The first script after the thaw is a
  // newcomer's acquire with a wait: the line gets its extra window before anyone's presence is renewed.
  dlock::test::RedisServer redis;
  auto newcomer = dlock::test::make_service(redis);
  const long long now = dlock::test::server_ms(redis);
  redis.run({"ZADD", "dlock:{k}:queue", "1", "first:1", "2", "second:1"});
  redis.run({"ZADD", "dlock:{k}:alive", std::to_string(now - 500), "first:1", std::to_string(now - 500), "second:1",
             std::to_string(now - 1500), ""});
  auto guard = newcomer->try_lock("k", {.wait = 200ms});
  CHECK_FALSE(guard);
  CHECK(redis.run({"ZRANGE", "dlock:{k}:queue", "0", "-1"}).rfind("first:1 second:1", 0) == 0);
}

TEST_CASE("after the server stood still, the second waiter's own retry does not take the first's turn", "[line][fault]") {
  // The same line; the first script after the thaw is the second waiter's own retry.
  dlock::test::RedisServer redis;
  const long long now = dlock::test::server_ms(redis);
  redis.run({"ZADD", "dlock:{k}:queue", "1", "first:1", "2", "second:1"});
  redis.run({"ZADD", "dlock:{k}:alive", std::to_string(now - 500), "first:1", std::to_string(now - 500), "second:1",
             std::to_string(now - 1500), ""});
  const std::string reply =
      redis.run({"EVAL", dlock::detail::kAcquireScript.source, "5", "dlock:{k}", "dlock:{k}:fence", "dlock:{k}:queue",
                 "dlock:{k}:alive", "dlock:{k}:turn", "second:1", "30000", "5000 1000 604800000"});
  CHECK(std::stoll(reply) <= 0);  // told to wait (-1 - nap)
  CHECK(redis.run({"HEXISTS", "dlock:{k}", "second:1"}) == "0");
  CHECK(redis.run({"ZSCORE", "dlock:{k}:queue", "first:1"}) == "1");
}
