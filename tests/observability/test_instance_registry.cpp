// The instance registry: who holds a lock, at no cost per lock. Each service
// keeps one entry about itself (host, pid, start time), written at start-up,
// kept alive by the watchdog, deleted when the service ends.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <spdlog/sinks/ostream_sink.h>

#include <sstream>
#include <thread>

#include "readme_acl.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

namespace {

// The registry entries in Redis, by a fresh SCAN.
std::vector<std::string> entries(const dlock::test::RedisServer& redis) {
  const std::string listed = redis.run({"SCAN", "0", "MATCH", "dlock:instance:*", "COUNT", "1000"});
  std::istringstream words(listed);
  std::vector<std::string> names;
  std::string cursor;
  words >> cursor;
  for (std::string name; words >> name;) names.push_back(name);
  return names;
}

// The instance part of the id holding `key`.
std::string holder_instance(const dlock::test::RedisServer& redis, const std::string& key) {
  return redis.run({"HKEYS", "dlock:{" + key + "}"}).substr(0, 32);
}

long long counted_calls(const dlock::test::RedisServer& redis, const std::string& command) {
  const std::string stats = redis.run({"INFO", "commandstats"});
  const std::string field = "cmdstat_" + command + ":calls=";
  const auto at = stats.find(field);
  return at == std::string::npos ? 0 : std::stoll(stats.substr(at + field.size()));
}

}  // namespace

TEST_CASE("a service writes one registry entry about itself, named by its instance id", "[registry]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("k");
  const std::string key = "dlock:instance:" + holder_instance(redis, "k");
  CHECK(entries(redis) == std::vector<std::string>{key});
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string entry = redis.run({"GET", key});
  CHECK_THAT(entry, Catch::StartsWith("host=" + std::string(host) + " pid=" + std::to_string(::getpid()) +
                                      " started_ms="));
  const long long ttl = std::stoll(redis.run({"PTTL", key}));
  CHECK(ttl > 0);
  CHECK(ttl <= 3 * 30000);  // three lease periods
}

TEST_CASE("the watchdog keeps the entry alive past its expiry while the service lives", "[registry]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 200ms; });
  auto guard = service->lock("k");  // starts the watchdog
  const std::string key = "dlock:instance:" + holder_instance(redis, "k");
  CHECK(std::stoll(redis.run({"PTTL", key})) <= 600);
  std::this_thread::sleep_for(1500ms);  // well past the 600 ms the entry would live unrefreshed
  CHECK(redis.run({"EXISTS", key}) == "1");
  guard.unlock();
  std::this_thread::sleep_for(1500ms);  // and with nothing held
  CHECK(redis.run({"EXISTS", key}) == "1");
}

TEST_CASE("a service that ends in order deletes its entry", "[registry]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  service->lock("k").unlock();
  REQUIRE(entries(redis).size() == 1);
  auto guard = service->lock("k");
  service.reset();
  CHECK(entries(redis).size() == 1);  // a guard keeps the service's internals, and its entry, alive
  guard.unlock();
  guard = dlock::LockGuard();
  CHECK(entries(redis).empty());
}

TEST_CASE("the registry costs nothing per lock and unlock", "[registry]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  service->lock("k").unlock();  // the fencing counter exists from here on
  const long long sets = counted_calls(redis, "set"), gets = counted_calls(redis, "get");
  for (int i = 0; i < 100; ++i) {
    auto outer = service->lock("k");
    auto inner = service->lock("k");
  }
  CHECK(counted_calls(redis, "set") == sets);
  CHECK(counted_calls(redis, "get") == gets);
}

TEST_CASE("a Redis that refuses the entry costs one warning and nothing else", "[registry][acl]") {
  dlock::test::RedisServer redis;
  // docs/operations.md's rights, but for keys of lock names only: the entry's name is refused.
  std::vector<std::string> argv = {"ACL", "SETUSER", "locks-only", "reset", "on", ">secret"};
  for (const auto& right : dlock::test::readme_minimal_acl()) argv.push_back(right == "~dlock:*" ? "~dlock:{*" : right);
  REQUIRE(redis.run(argv) == "OK");
  dlock::Config config = redis.config();
  config.redis.username = "locks-only";
  config.redis.password = "secret";
  std::ostringstream log;
  auto logger = std::make_shared<spdlog::logger>("registry", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  logger->set_level(spdlog::level::info);
  auto executor = std::make_shared<dlock::HiredisExecutor>(config.redis);
  executor->connect();
  {
    auto service = std::make_shared<dlock::RedisLockService>(executor, config.lock, logger);
    auto outer = service->lock("k");
    auto inner = service->lock("k");
    CHECK(service->hold_count("k") == 2);
  }
  INFO(log.str());
  CHECK(entries(redis).empty());
  CHECK(redis.run({"EXISTS", "dlock:{k}"}) == "0");
  std::istringstream lines(log.str());
  int warnings = 0;
  for (std::string line; std::getline(lines, line);) warnings += line.find("registry entry") != std::string::npos;
  CHECK(warnings == 1);
  CHECK_THAT(log.str(), Catch::Contains("NOPERM"));
}
