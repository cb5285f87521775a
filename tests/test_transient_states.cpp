// Redis answers "not now" while it loads its dataset after a restart
// (LOADING) or runs a long script (BUSY): lock() waits that out within its
// wait, as it waits out an outage, and names the state if the wait ends in it.
#include <catch2/catch.hpp>

#include <thread>

#include "fault_tools.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

namespace {

// A script that keeps the server busy for about `seconds` (others get BUSY after the threshold).
std::thread run_long_script(const dlock::test::RedisServer& redis, int seconds) {
  const std::string busy_loop = "local s = tonumber(redis.call('TIME')[1]) "
                                "while tonumber(redis.call('TIME')[1]) < s + " + std::to_string(seconds) + " do end "
                                "return 1";
  std::thread script([&redis, busy_loop] { dlock::test::run_back_to_back(redis, {{"EVAL", busy_loop, "0"}}, 10000ms); });
  std::this_thread::sleep_for(300ms);  // past the busy-reply threshold
  return script;
}

}  // namespace

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
