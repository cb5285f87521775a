// A guard's destructor sends its release and returns without waiting for the
// reply: the reply is read off the caller's thread, a re-lock of the same key
// is sent after the release on its connection, and nothing in flight is lost
// when the service goes.
#include <catch2/catch.hpp>

#include <spdlog/sinks/base_sink.h>

#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "captured_log.hpp"
#include "fault_tools.hpp"
#include "forwarding_executor.hpp"
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

// The keys the service's on_lost was told of (kept alive by the hook, which may run after the test's scope).
class LostKeys {
 public:
  explicit LostKeys(dlock::RedisLockService& service) : told_(std::make_shared<Told>()) {
    service.on_lost([told = told_](const std::string& key) {
      std::lock_guard lock(told->mutex);
      told->keys.push_back(key);
    });
  }
  std::vector<std::string> keys() const {
    std::lock_guard lock(told_->mutex);
    return told_->keys;
  }

 private:
  struct Told {
    std::mutex mutex;
    std::vector<std::string> keys;
  };
  std::shared_ptr<Told> told_;
};

// An executor as Sentinel's and Cluster's are: start() runs the whole call (the default). Its first
// release of a semaphore's record runs in Redis and then fails as if its reply were lost.
class ReplyLosingExecutor final : public dlock::test::ForwardingExecutor {
 public:
  using ForwardingExecutor::ForwardingExecutor;
  dlock::RedisReply command_parts(std::span<const std::string_view> argv) override {
    dlock::RedisReply reply = inner_->command_parts(argv);
    const bool releases_record = argv.size() > 3 && argv[0] == "EVALSHA" && argv[3].find(":holders:") != std::string_view::npos;
    if (releases_record && !cut_.exchange(true)) throw dlock::ConnectionError("test: the reply was lost");
    return reply;
  }
  bool cut() const { return cut_.load(); }

 private:
  std::atomic<bool> cut_{false};
};

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
  const LostKeys told(*service);
  {
    auto guard = service->lock("vanished");
    REQUIRE(guard);
    REQUIRE(redis.run({"DEL", "dlock:{vanished}"}) == "1");  // taken away behind the holder's back
  }
  CHECK(dlock::test::eventually([&] { return service->stats().lost == 1; }));
  CHECK(dlock::test::eventually([&] { return told.keys() == std::vector<std::string>{"vanished"}; }));
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

// The read-write lock's and the semaphore's holds are released off the path as a lock's: an acquisition of
// the same primitive follows this process's releases still in flight, on their connection.

TEST_CASE("a permit taken and given back in a tight loop never finds its own release in the way",
          "[release][off-path][semaphore]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const dlock::Semaphore single = service->semaphore("tight-permit", 1);
  constexpr int kCycles = 200;
  for (int i = 0; i < kCycles; ++i) {
    // Tries once: a release of its own still on its way would leave it empty-handed.
    auto permit = single.try_acquire();
    REQUIRE(permit);
  }
  CHECK(service->stats().busy == 0);
  CHECK(dlock::test::eventually([&] { return service->stats().released == kCycles; }));
  CHECK(service->stats().releases_failed == 0);
  CHECK(single.available() == 1);
}

TEST_CASE("write and read holds alternating on one thread never find their own releases in the way",
          "[release][off-path][read-write]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  constexpr int kCycles = 100;
  for (int i = 0; i < kCycles; ++i) {
    {
      auto write = service->try_write_lock("tight-rw");
      REQUIRE(write);
    }
    auto read = service->try_read_lock("tight-rw");  // after a write's release still on its way
    REQUIRE(read);
    read = dlock::LockGuard();
    auto write = service->try_write_lock("tight-rw");  // after a read's release still on its way
    REQUIRE(write);
  }
  CHECK(service->stats().busy == 0);
  CHECK(dlock::test::eventually([&] { return service->stats().released == 3 * kCycles; }));
  CHECK(service->stats().releases_failed == 0);
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{tight-rw}:rw:write"}));
}

TEST_CASE("a permit asked for while its own release still waits in Redis follows it there and is granted",
          "[release][off-path][semaphore]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const dlock::Semaphore single = service->semaphore("follow-permit", 1);
  {
    auto permit = single.acquire();
    REQUIRE(permit);
    pause_writes(redis, 300);
  }
  // The release is held by the pause, unanswered: this try goes after it on its connection.
  CHECK(service->stats().released == 0);
  auto again = single.try_acquire();
  CHECK(again);
  CHECK(service->stats().released == 1);
  CHECK(service->stats().busy == 0);
  CHECK(redis.run({"ZCARD", "dlock:{follow-permit}:semaphore:queue"}) == "0");
}

TEST_CASE("all three permits asked for while their three releases wait in Redis follow them and are granted",
          "[release][off-path][semaphore]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const dlock::Semaphore three = service->semaphore("follow-permits", 3);
  {
    std::vector<dlock::LockGuard> permits;
    for (int i = 0; i < 3; ++i) permits.push_back(three.acquire());
    pause_writes(redis, 300);
  }
  // Three releases unanswered: two are read first, the try follows the third on its connection.
  CHECK(service->stats().released == 0);
  auto all = three.try_acquire(3);
  CHECK(all);
  CHECK(service->stats().released == 3);
  CHECK(service->stats().busy == 0);
  all = dlock::LockGuard();
  CHECK(three.available() == 3);  // follows that release too
}

TEST_CASE("a write hold deleted behind its holder's back is reported lost by the release after its guard",
          "[release][off-path][read-write]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const LostKeys told(*service);
  {
    auto guard = service->write_lock("vanished-rw");
    REQUIRE(guard);
    REQUIRE(redis.run({"DEL", "dlock:{vanished-rw}:rw:write"}) == "1");
  }
  CHECK(dlock::test::eventually([&] { return service->stats().lost == 1; }));
  CHECK(dlock::test::eventually([&] { return told.keys() == std::vector<std::string>{"vanished-rw"}; }));
  CHECK(service->stats().released == 0);
}

TEST_CASE("a write hold's release whose connection is cut before it ran is sent again and frees it",
          "[release][off-path][read-write]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  {
    auto guard = service->write_lock("cut-rw");
    REQUIRE(guard);
    pause_writes(redis, 500);
  }
  // Read by Redis, held by the pause, dropped with its connection: it never runs.
  REQUIRE(redis.run({"CLIENT", "KILL", "TYPE", "normal"}) != "0");
  // Sent again by the service's thread, it frees the hold now, not its 30 s lease later.
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{cut-rw}:rw:write"}, 5s));
  CHECK(dlock::test::eventually([&] { return service->stats().released == 1; }));
  CHECK(service->stats().lost == 0);
}

TEST_CASE("a permit's release in flight while Redis is frozen neither holds up its caller nor is called lost",
          "[release][off-path][semaphore]") {
  dlock::test::RedisServer redis;
  dlock::test::CapturedLog log;
  auto service = logging_service(redis, log);
  const dlock::Semaphore single = service->semaphore("frozen-permit", 1);
  auto permit = single.acquire();
  REQUIRE(permit);
  redis.freeze();
  permit = dlock::LockGuard();  // the destructor's release: no reply until the thaw
  CHECK(service->stats().releases_failed == 0);
  CHECK(service->stats().released == 0);
  std::this_thread::sleep_for(1500ms);  // past the command timeout: the reply is given up, the release sent again
  redis.thaw();
  // The first send runs at the thaw; a later one finds the permit gone and cannot tell who freed it: never a loss.
  CHECK(dlock::test::eventually([&] { return single.available() == 1; }, 10s));
  CHECK(dlock::test::eventually(
      [&] { return service->stats().released == 1 || log.str().find("reply was lost") != std::string::npos; }, 10s));
  CHECK(service->stats().lost == 0);
}

TEST_CASE("permit releases still in flight when the service goes reach Redis before it is gone",
          "[release][off-path][semaphore]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  {
    const dlock::Semaphore three = service->semaphore("exit-permits", 3);
    std::vector<dlock::LockGuard> permits;
    for (int i = 0; i < 3; ++i) permits.push_back(three.acquire());
    pause_writes(redis, 400);
  }
  service.reset();
  CHECK(redis.run({"SCARD", "dlock:{exit-permits}:semaphore:holders"}) == "0");
}

TEST_CASE("review: a permit's release that ran but lost its reply inside start() is not reported lost",
          "[release][off-path][semaphore]") {
  dlock::test::RedisServer redis;
  dlock::Config config = redis.config();
  auto inner = std::make_shared<dlock::HiredisExecutor>(config.redis);
  inner->connect();
  auto executor = std::make_shared<ReplyLosingExecutor>(inner);
  auto service = std::make_shared<dlock::RedisLockService>(executor, config.lock);
  const LostKeys told(*service);
  const dlock::Semaphore single = service->semaphore("ran-permit", 1);
  {
    auto permit = single.acquire();
    REQUIRE(permit);
  }
  REQUIRE(executor->cut());
  // It ran: the permit is back. Sent again, the release finds it gone, and nobody can tell it was not
  // that first send's doing: counted failed, never lost.
  CHECK(single.available() == 1);
  CHECK(service->stats().lost == 0);
  CHECK(service->stats().releases_failed == 1);
  CHECK(told.keys().empty());
}

TEST_CASE("a write hold's release Redis answers NOSCRIPT is run again off the caller's path and frees it",
          "[release][off-path][read-write]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  {
    auto guard = service->write_lock("noscript-rw");
    REQUIRE(guard);
    REQUIRE(redis.run({"SCRIPT", "FLUSH"}) == "OK");
  }
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{noscript-rw}:rw:write"}, 5s));
  CHECK(dlock::test::eventually([&] { return service->stats().released == 1; }));
  CHECK(service->stats().lost == 0);
  CHECK(service->stats().releases_failed == 0);
}
