// flash_sale's payment check (payment_peak ≤ payment_slots) after what the
// crash demo does: buyers SIGKILLed in the middle of payment calls must not
// make a later sale report more calls at once than the semaphore allows,
// and the check must still catch calls that really pile up past the slots.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <regex>

#include "fault_tools.hpp"
#include "services.hpp"
#include "shell_command.hpp"
#include "temp_dir.hpp"

using namespace std::chrono_literals;

namespace {

// A short permit lease: the permits of killed buyers come back within 3 s.
// In a scratch directory removed when the program ends.
std::string config_for(const dlock::test::RedisServer& redis) {
  static const dlock::test::TempDir scratch;
  return scratch.write("payment-check-" + std::to_string(redis.port()) + ".yaml",
                       "redis:\n  host: 127.0.0.1\n  port: " + std::to_string(redis.port()) +
                           "\nlock:\n  watchdog_timeout_ms: 3000\nlogging:\n  level: warn\n");
}

long long field(const std::string& output, const std::string& name) {
  std::smatch match;
  REQUIRE(std::regex_search(output, match, std::regex(name + "=(-?[0-9]+)")));
  return std::stoll(match[1]);
}

// Starts two flash_sale processes that keep buying and paying, waits until
// payment calls are in flight, and SIGKILLs both; again until at least one
// call was left unfinished in Redis (its process died between its start and
// its end). Returns how many were left.
long long kill_buyers_mid_call(const dlock::test::RedisServer& redis, const std::string& config,
                               const std::string& sku) {
  const std::string calls = "payments:{" + sku + "}:calls";
  const std::vector<std::string> argv = {FLASH_SALE_BIN, "--config", config,   "--sku",          sku,
                                         "--buyers",     "1000000", "--threads", "6", "--payment-slots", "3"};
  const int quiet = ::open("/dev/null", O_WRONLY);
  long long left = 0;
  for (int attempt = 0; attempt < 10 && left == 0; ++attempt) {
    dlock::test::Child first(argv, quiet), second(argv, quiet);
    REQUIRE(dlock::test::eventually([&] { return std::stoll(redis.run({"ZCARD", calls})) >= 2; }, 20s));
    first.kill_now();
    second.kill_now();
    left = std::stoll(redis.run({"ZCARD", calls}));
  }
  ::close(quiet);
  return left;
}

}  // namespace

TEST_CASE("flash_sale's payment check passes on a sale continued after its buyers were SIGKILLed mid-call",
          "[examples][semaphore][faults]") {
  dlock::test::RedisServer redis;
  const std::string config = config_for(redis);
  const std::string base = std::string(FLASH_SALE_BIN) + " --config " + config + " --sku C1 --payment-slots 3";
  REQUIRE(dlock::test::run_shell(base + " --stock 1000000 --buyers 0 --reset").status == 0);

  // Killed buyers leave calls they never ended, and permits they never gave back.
  REQUIRE(kill_buyers_mid_call(redis, config, "C1") > 0);

  // Straight away, while those are still in Redis: the continuing sale waits
  // for the dead buyers' permits, pays through all 3 slots, and its check holds.
  auto continued = dlock::test::run_shell(base + " --buyers 200 --threads 8 --processes 2");
  INFO(continued.output);
  CHECK(continued.status == 0);
  CHECK(field(continued.output, "payment_slots") == 3);
  CHECK(field(continued.output, "payment_peak") <= 3);
  CHECK_THAT(continued.output, !Catch::Contains("more payment calls at once than the semaphore allows"));
}

TEST_CASE("flash_sale's payment check reports calls past the slots as an error when the semaphore is off",
          "[examples][semaphore]") {
  dlock::test::RedisServer redis;
  // The stock's lock stays on, so the check speaks: without the payment
  // semaphore the calls pile up past the slots, and the sale fails on it.
  // Calls of 100 ms: with 2 ms ones, a slow build (ASan) serialised by the
  // stock's lock overlapped only 3 at a time, and the case failed for that.
  auto result = dlock::test::run_shell(std::string(FLASH_SALE_BIN) + " --config " + config_for(redis) +
                                       " --sku C2 --stock 300 --buyers 100 --threads 8 --processes 3"
                                       " --payment-slots 3 --payment-ms 100 --unlimited-payments --reset");
  INFO(result.output);
  CHECK(result.status == 1);
  CHECK(field(result.output, "payment_peak") > 3);
  CHECK_THAT(result.output, Catch::Contains("error: more payment calls at once than the semaphore allows"));
  CHECK(field(result.output, "oversold") == 0);  // the lock still guarded the stock
}
