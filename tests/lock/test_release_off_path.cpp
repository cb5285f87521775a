// A guard's destructor sends its release and returns without waiting for the
// reply: the reply is read off the caller's thread, a re-lock of the same key
// is sent after the release on its connection, and nothing in flight is lost
// when the service goes.
#include <catch2/catch.hpp>

#include <spdlog/sinks/base_sink.h>

#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "captured_log.hpp"
#include "fault_tools.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

namespace {

// A service whose log lines land in `out`.
std::shared_ptr<dlock::RedisLockService> logging_service(const dlock::test::RedisServer& redis,
                                                         const dlock::test::CapturedLog& out) {
  dlock::Config config = redis.config();
  auto executor = std::make_shared<dlock::HiredisExecutor>(config.redis);
  executor->connect();
  return std::make_shared<dlock::RedisLockService>(executor, config.lock, out.logger("off-path"));
}

// Makes Redis hold every command that writes for `ms`: a release sent now gets its reply only then.
void pause_writes(const dlock::test::RedisServer& redis, int ms) {
  REQUIRE(redis.run({"CLIENT", "PAUSE", std::to_string(ms), "WRITE"}) == "OK");
}

}  // namespace

TEST_CASE("re-locking a key right after each guard's destructor never finds its own release in the way",
          "[release][off-path]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  constexpr int kCycles = 300;
  for (int i = 0; i < kCycles; ++i) {
    auto guard = service->lock("tight");
    REQUIRE(guard);
  }
  // Each lock() was granted at its first try: none found the key busy, none joined the line.
  const dlock::LockStats stats = service->stats();
  CHECK(stats.acquired == kCycles);
  CHECK(stats.contended == 0);
  CHECK(stats.busy == 0);
  CHECK(stats.lost == 0);
  CHECK(dlock::test::eventually([&] { return service->stats().released == kCycles; }));
  CHECK(service->stats().releases_failed == 0);
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{tight}"}) == "0"; }));
}

TEST_CASE("a re-lock sent while its own release still waits in Redis follows it there and is granted",
          "[release][off-path]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.wait = 5s; });
  {
    auto guard = service->lock("follow");
    REQUIRE(guard);
    pause_writes(redis, 300);
  }
  // The release is held by the pause, unanswered: this lock() goes after it on its connection.
  CHECK(service->stats().released == 0);
  auto again = service->lock("follow");
  CHECK(again);
  const dlock::LockStats stats = service->stats();
  CHECK(stats.released == 1);
  CHECK(stats.acquired == 2);
  CHECK(stats.contended == 0);  // it never found its own process's lock in the way
  CHECK(redis.run({"ZCARD", "dlock:{follow}:queue"}) == "0");
}

TEST_CASE("a release that finds the hold gone after its guard is gone reports the loss", "[release][off-path]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  std::mutex mutex;
  std::vector<std::string> told;
  service->on_lost([&](const std::string& key) {
    std::lock_guard lock(mutex);
    told.push_back(key);
  });
  {
    auto guard = service->lock("vanished");
    REQUIRE(guard);
    REQUIRE(redis.run({"DEL", "dlock:{vanished}"}) == "1");  // taken away behind the holder's back
  }
  CHECK(dlock::test::eventually([&] { return service->stats().lost == 1; }));
  CHECK(dlock::test::eventually([&] {
    std::lock_guard lock(mutex);
    return told == std::vector<std::string>{"vanished"};
  }));
  CHECK(service->stats().released == 0);
}

TEST_CASE("a release in flight while Redis is frozen does not hold up its caller and is logged at the timeout",
          "[release][off-path]") {
  dlock::test::RedisServer redis;
  dlock::test::CapturedLog log;
  auto service = logging_service(redis, log);
  auto guard = service->lock("frozen");
  REQUIRE(guard);
  redis.freeze();
  guard = dlock::LockGuard();  // the destructor's release
  // A caller that waited would have come back only after the command timeout, with the failure counted.
  CHECK(service->stats().releases_failed == 0);
  CHECK(dlock::test::eventually([&] { return service->stats().releases_failed == 1; }));
  redis.thaw();
  CHECK(dlock::test::eventually([&] { return log.str().find("'frozen' may not be released") != std::string::npos; }));
  CHECK(log.str().find("command timeout") != std::string::npos);
  // The release was written before the freeze ended: Redis runs it once it wakes.
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{frozen}"}) == "0"; }));
}

TEST_CASE("releases still in flight when the service goes reach Redis before it is gone", "[release][off-path]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const std::vector<std::string> keys{"exit:a", "exit:b", "exit:c", "exit:d"};
  {
    std::vector<dlock::LockGuard> guards;
    for (const auto& key : keys) guards.push_back(service->lock(key));
    pause_writes(redis, 400);
  }
  // The releases wait out the pause in Redis; the service's end waits for their replies.
  service.reset();
  for (const auto& key : keys) CHECK(redis.run({"EXISTS", "dlock:{" + key + "}"}) == "0");
}

// Review findings (a fresh-eyes reading of the change), each reproduced here.

TEST_CASE("review: a re-lock after a release Redis no longer has the script for, on a pool of one connection",
          "[release][off-path][review]") {
  // The re-lock holds the release's connection while the release is loaded and run again: with one
  // connection in the pool it must give it back first, or neither ever runs.
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.pool_size = 1;
    c.lock.wait = 3s;
  });
  auto guard = service->lock("flushed");
  REQUIRE(guard);
  REQUIRE(redis.run({"SCRIPT", "FLUSH"}) == "OK");
  redis.freeze();
  guard = dlock::LockGuard();  // its release is sent, and will be answered NOSCRIPT
  dlock::LockGuard again;  // kept: its own release would count in released too
  std::thread relock([&] { again = service->try_lock("flushed", {.wait = 3s}); });
  std::this_thread::sleep_for(200ms);  // the re-lock claims the release and is sent after it
  redis.thaw();
  relock.join();
  CHECK(again);
  CHECK(service->stats().releases_failed == 0);
  CHECK(dlock::test::eventually([&] { return service->stats().released == 1; }));
}

TEST_CASE("review: a try_lock sent after its own release that Redis answered NOSCRIPT gets the lock",
          "[release][off-path][review]") {
  // Only the acquire script is loaded again (by another key's lock) before the release runs: the
  // re-lock, sent after the release, finds its own lock still held; once the release has run, it tries again.
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("half-loaded");
  REQUIRE(guard);
  REQUIRE(redis.run({"SCRIPT", "FLUSH"}) == "OK");
  auto other = service->lock("loads-acquire");  // NOSCRIPT, then the acquire script is loaded
  REQUIRE(other);
  redis.freeze();
  guard = dlock::LockGuard();
  dlock::LockGuard again;
  std::thread relock([&] { again = service->try_lock("half-loaded"); });
  std::this_thread::sleep_for(200ms);
  redis.thaw();
  relock.join();
  CHECK(again);
  CHECK(service->stats().contended == 0);
}

TEST_CASE("review: a release Redis answers BUSY is sent again by the service's thread until it runs",
          "[release][off-path][review]") {
  dlock::test::RedisServer redis({"--busy-reply-threshold", "100"});
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("busy-release", {.lease = 20s});
  REQUIRE(guard);
  std::thread script = dlock::test::run_long_script(redis, 2);  // Redis answers BUSY for ~2 s
  guard = dlock::LockGuard();
  // Neither the caller nor a claimer waits it out: the deferred thread sends it again after the script.
  CHECK(dlock::test::eventually([&] { return service->stats().released == 1; }));
  script.join();
  CHECK(redis.run({"EXISTS", "dlock:{busy-release}"}) == "0");
  CHECK(service->stats().releases_failed == 0);
}

namespace {

// A sink whose first line about a loss blocks until the test opens it: the deferred thread stalls mid-settle.
class GateSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::promise<void> entered;
  std::shared_future<void> open;

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (!once_ && std::string_view(msg.payload.data(), msg.payload.size()).find("lost by owner") != std::string_view::npos) {
      once_ = true;
      entered.set_value();
      open.wait();
    }
  }
  void flush_() override {}

 private:
  bool once_ = false;
};

}  // namespace

TEST_CASE("review: the deferred thread runs a release again without a pooled connection, which its releases hold",
          "[release][off-path][review]") {
  dlock::test::RedisServer redis;
  dlock::Config config = redis.config();
  config.redis.pool_size = 2;
  config.redis.command_timeout = 500ms;
  std::promise<void> gate;
  auto sink = std::make_shared<GateSink>();
  sink->open = gate.get_future().share();
  std::future<void> entered = sink->entered.get_future();
  auto executor = std::make_shared<dlock::HiredisExecutor>(config.redis);
  executor->connect();
  auto service = std::make_shared<dlock::RedisLockService>(executor, config.lock,
                                                           std::make_shared<spdlog::logger>("gate", sink));
  auto ga = service->lock("a");
  auto gb = service->lock("b");
  auto g1 = service->lock("p1");
  auto g2 = service->lock("p2");
  REQUIRE(redis.run({"DEL", "dlock:{a}"}) == "1");
  REQUIRE(redis.run({"SCRIPT", "FLUSH"}) == "OK");
  redis.freeze();
  ga = dlock::LockGuard();
  gb = dlock::LockGuard();
  redis.thaw();
  // Both answered NOSCRIPT: the thread runs a's again, finds it lost, and stalls in its log line.
  REQUIRE(entered.wait_for(5s) == std::future_status::ready);
  g1 = dlock::LockGuard();  // the pool's two connections are now held by releases in the table
  g2 = dlock::LockGuard();
  gate.set_value();
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{b}"}) == "0"; }, 3s));
  CHECK(service->stats().releases_failed == 0);
  CHECK(dlock::test::eventually([&] { return service->stats().released == 3; }));
}
