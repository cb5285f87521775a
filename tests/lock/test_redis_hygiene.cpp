// What dlock leaves in a Redis it shares with everyone else: nothing that
// piles up once locks are unused, and a warning when the server may evict
// a held lock.
#include <catch2/catch.hpp>

#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

#include "services.hpp"

using namespace std::chrono_literals;

namespace {

// A service whose log lines land in `out`.
std::shared_ptr<dlock::RedisLockService> logged_service(const dlock::test::RedisServer& redis, std::ostringstream& out,
                                                        const std::function<void(dlock::Config&)>& tweak = {}) {
  dlock::Config config = redis.config();
  if (tweak) tweak(config);
  auto executor = std::make_shared<dlock::HiredisExecutor>(config.redis);
  executor->connect();
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = std::make_shared<spdlog::logger>("hygiene", sink);
  logger->set_level(spdlog::level::debug);
  return std::make_shared<dlock::RedisLockService>(executor, config.lock, logger);
}

}  // namespace

TEST_CASE("locks of many keys leave nothing behind once unused and their fence retention passed",
          "[hygiene][fencing]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.fence_retention = 500ms; });
  const std::string before = redis.run({"DBSIZE"});
  for (int i = 0; i < 300; ++i) service->lock("order:" + std::to_string(i)).unlock();
  CHECK(std::stoi(redis.run({"DBSIZE"})) >= 300);  // their fencing counters, for now
  CHECK(dlock::test::eventually([&] { return redis.run({"DBSIZE"}) == before; }, 5000ms));
}

TEST_CASE("a key locked again after its fence expired still gets a greater token", "[hygiene][fencing]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.fence_retention = 200ms; });
  std::uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    auto guard = service->lock("reused");
    CHECK(guard.fencing_token() > last);
    last = guard.fencing_token();
    guard.unlock();
    REQUIRE(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{reused}:fence"}) == "0"; }, 3000ms));
  }
}

TEST_CASE("a Redis that may evict held locks is named at start-up, with what to set", "[hygiene]") {
  dlock::test::RedisServer redis({"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"});
  std::ostringstream log;
  auto service = logged_service(redis, log);
  CHECK_THAT(log.str(), Catch::Contains("[warning]") && Catch::Contains("allkeys-lru") &&
                            Catch::Contains("maxmemory-policy noeviction"));
}

TEST_CASE("a Redis that never evicts, or a user who may not ask, gives no warning", "[hygiene]") {
  dlock::test::RedisServer safe({"--maxmemory", "100mb", "--maxmemory-policy", "noeviction"});
  std::ostringstream quiet;
  logged_service(safe, quiet);
  CHECK_THAT(quiet.str(), !Catch::Contains("[warning]"));

  dlock::test::RedisServer evicting({"--maxmemory", "100mb", "--maxmemory-policy", "volatile-ttl"});
  evicting.run({"ACL", "SETUSER", "noinfo", "on", ">secret", "~*", "&*", "+@all", "-info"});
  std::ostringstream skipped;
  auto service = logged_service(evicting, skipped, [](dlock::Config& c) {
    c.redis.username = "noinfo";
    c.redis.password = "secret";
  });
  CHECK_THAT(skipped.str(), !Catch::Contains("[warning]") && Catch::Contains("eviction check skipped"));
  CHECK(service->lock("still-works"));
}

TEST_CASE("a master with fewer replicas than lock.replica_acks asks for is named at start-up", "[hygiene]") {
  dlock::test::RedisServer alone;
  std::ostringstream log;
  auto service = logged_service(alone, log, [](dlock::Config& c) { c.lock.replica_acks = 1; });
  CHECK_THAT(log.str(), Catch::Contains("[warning]") && Catch::Contains("0 replica(s) connected") &&
                            Catch::Contains("lock.replica_acks asks 1"));
  std::ostringstream quiet;
  logged_service(alone, quiet);
  CHECK_THAT(quiet.str(), !Catch::Contains("replica"));
}
