// The watchdog renews held locks, leaves fixed leases alone, and tells a
// holder that lost its lock.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "forwarding_executor.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

namespace {

std::shared_ptr<dlock::RedisLockService> short_lease_service(const dlock::test::RedisServer& redis, int lease_ms) {
  return dlock::test::make_service(redis, [lease_ms](dlock::Config& c) { c.lock.watchdog_timeout = dlock::Millis(lease_ms); });
}

}  // namespace

TEST_CASE("the watchdog keeps a held lock past three times its lease", "[watchdog]") {
  dlock::test::RedisServer redis;
  auto service = short_lease_service(redis, 600);
  auto other = dlock::test::make_service(redis);
  auto guard = service->lock("long-job");
  std::this_thread::sleep_for(2000ms);  // > 3 × 600 ms
  CHECK(guard);
  CHECK_FALSE(guard.lost());
  CHECK(redis.run({"EXISTS", "dlock:{long-job}"}) == "1");
  long long pttl = std::stoll(redis.run({"PTTL", "dlock:{long-job}"}));
  CHECK(pttl > 0);
  CHECK(pttl <= 600);
  CHECK_FALSE(other->try_lock("long-job"));
  CHECK(service->watched_locks() == 1);
  guard.unlock();
  CHECK(service->watched_locks() == 0);
}

TEST_CASE("a fixed lease is never renewed and expires", "[watchdog]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("fixed", {.lease = 300ms});
  long long pttl = std::stoll(redis.run({"PTTL", "dlock:{fixed}"}));
  CHECK(pttl > 0);
  CHECK(pttl <= 300);
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{fixed}"}) == "0"; }, 3000ms));
  CHECK(guard.lost());
  CHECK(guard.remaining() == 0ms);
}

TEST_CASE("deleting the key behind a holder marks it lost and calls on_lost within a renewal period", "[watchdog]") {
  dlock::test::RedisServer redis;
  auto service = short_lease_service(redis, 900);
  std::mutex mutex;
  std::vector<std::string> lost_keys;
  service->on_lost([&](const std::string& key) {
    std::lock_guard lock(mutex);
    lost_keys.push_back(key);
  });
  auto guard = service->lock("victim");
  auto stop = guard.stop_token();
  CHECK_FALSE(stop.stop_requested());
  redis.run({"DEL", "dlock:{victim}"});
  auto deleted_at = std::chrono::steady_clock::now();

  REQUIRE(dlock::test::eventually([&] { return guard.lost(); }, 3000ms));
  // One renewal period is 300 ms; allow scheduling slack on shared cores.
  CHECK(dlock::test::elapsed_ms(deleted_at) < 300 + 700);
  CHECK(stop.stop_requested());
  CHECK_FALSE(guard);
  CHECK_THROWS_AS(guard.check(), dlock::LockLostError);
  REQUIRE(dlock::test::eventually([&] {
    std::lock_guard lock(mutex);
    return !lost_keys.empty();
  }));
  std::lock_guard lock(mutex);
  CHECK(lost_keys == std::vector<std::string>{"victim"});
}

TEST_CASE("the watchdog renews many locks of one service", "[watchdog]") {
  dlock::test::RedisServer redis;
  auto service = short_lease_service(redis, 600);
  std::vector<dlock::LockGuard> guards;
  for (int i = 0; i < 200; ++i) guards.push_back(service->lock("many:" + std::to_string(i)));
  std::this_thread::sleep_for(1500ms);
  int alive = 0;
  for (auto& guard : guards) alive += guard ? 1 : 0;
  CHECK(alive == 200);
  CHECK(redis.run({"EXISTS", "dlock:{many:0}", "dlock:{many:199}"}) == "2");
}

TEST_CASE("the watchdog renews hundreds of locks in a few script calls and tells exactly the ones taken away",
          "[watchdog]") {
  dlock::test::RedisServer redis;
  auto service = short_lease_service(redis, 900);
  std::vector<dlock::LockGuard> guards;
  for (int i = 0; i < 250; ++i) guards.push_back(service->lock("batch:" + std::to_string(i)));
  // One at the start, the end and the middle of each script call's share of a round.
  const std::set<int> taken{0, 99, 100, 150, 249};
  for (int i : taken) redis.run({"DEL", "dlock:{batch:" + std::to_string(i) + "}"});
  redis.run({"CONFIG", "RESETSTAT"});
  std::this_thread::sleep_for(2500ms);  // > 2 × 900 ms: every lock renewed at least twice
  for (int i = 0; i < 250; ++i) {
    INFO(i);
    CHECK(guards[static_cast<std::size_t>(i)].lost() == (taken.count(i) == 1));
    if (taken.count(i) == 0) CHECK(std::stoll(redis.run({"PTTL", "dlock:{batch:" + std::to_string(i) + "}"})) > 0);
  }
  CHECK(service->watched_locks() == 245);
  // Far fewer script calls than renewals: a call renews up to a hundred locks.
  const std::string stats = redis.run({"INFO", "commandstats"});
  const auto at = stats.find("cmdstat_evalsha:calls=");
  REQUIRE(at != std::string::npos);
  CHECK(std::stoll(stats.substr(at + 22)) < 250);
}

TEST_CASE("remaining() reports the validity left by the local clock", "[watchdog]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("k", {.lease = 5000ms});
  CHECK(guard.remaining() > 3000ms);
  CHECK(guard.remaining() <= 5000ms);
  dlock::LockGuard empty;
  CHECK(empty.remaining() == 0ms);
}

TEST_CASE("a short fixed lease is not reported lost while its validity lasts", "[watchdog]") {
  // The watchdog's verdict comes ahead of the validity's end by at most a tenth of the lease:
  // whenever lost() is seen true, the validity read after it must be within that tenth. The
  // check holds however the threads are scheduled (the test waits on no timing of its own).
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  constexpr auto lease = 200ms;
  auto guard = service->lock("short", {.lease = lease});
  const auto give_up = std::chrono::steady_clock::now() + 10 * lease;
  bool lost = false;
  while (!lost && std::chrono::steady_clock::now() < give_up) {
    lost = guard.lost();
    const auto left = guard.remaining();
    if (lost) CHECK(left <= lease / 10);
    std::this_thread::sleep_for(1ms);
  }
  CHECK(lost);  // a fixed lease that ran out while held is reported
}

TEST_CASE("a short watchdog lease that the config accepts is renewed", "[watchdog]") {
  // A renewal's I/O margins shrink with the lease (a twentieth of it below
  // 200 ms), so it still has time to run. 150 ms rather than the 50 ms this
  // once used: on 2 loaded cores under a sanitizer a thread may wait 35 ms
  // for a core, and what is checked is the margin, not the scheduler.
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 150ms; });
  auto guard = service->lock("short-watchdog");
  std::this_thread::sleep_for(900ms);
  CHECK_FALSE(guard.lost());
  CHECK(redis.run({"EXISTS", "dlock:{short-watchdog}"}) == "1");
}

namespace {

// An executor written before urgent_pipeline_parts existed: it overrides urgent_pipeline only, and
// counts the renewals' pipelines, which reach it through the interface's copying default.
class PipelineCountingExecutor final : public dlock::test::ForwardingExecutor {
 public:
  using ForwardingExecutor::ForwardingExecutor;
  std::vector<dlock::RedisReply> urgent_pipeline(const std::vector<dlock::RedisCommand>& commands,
                                                 std::chrono::steady_clock::time_point deadline) override {
    for (const dlock::RedisCommand& command : commands) {
      if (command.size() > 4 && command[0] == "EVALSHA" && command[3] == "dlock:{copied}") renewals_.fetch_add(1);
    }
    return inner_->urgent_pipeline(commands, deadline);
  }
  int renewals() const { return renewals_.load(); }

 private:
  std::atomic<int> renewals_{0};
};

}  // namespace

TEST_CASE("an executor that overrides only urgent_pipeline still renews the locks held through it", "[watchdog]") {
  dlock::test::RedisServer redis;
  dlock::Config config = redis.config();
  config.lock.watchdog_timeout = 600ms;
  auto inner = std::make_shared<dlock::HiredisExecutor>(config.redis);
  inner->connect();
  auto executor = std::make_shared<PipelineCountingExecutor>(inner);
  auto service = std::make_shared<dlock::RedisLockService>(executor, config.lock);
  auto guard = service->lock("copied");
  std::this_thread::sleep_for(1500ms);  // > 2 × 600 ms: renewed about every 200 ms meanwhile
  CHECK_FALSE(guard.lost());
  CHECK(executor->renewals() >= 2);
  CHECK(redis.run({"EXISTS", "dlock:{copied}"}) == "1");
}
