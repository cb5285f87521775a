// The examples, run as a user runs them, against a throwaway Redis.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <regex>

#include "services.hpp"
#include "shell_command.hpp"
#include "temp_dir.hpp"

using Run = dlock::test::CommandResult;

namespace {

Run run(const std::string& command) { return dlock::test::run_shell(command); }


// A config file naming the test server, as a user would write it.
// In a scratch directory removed when the program ends.
std::string config_for(const dlock::test::RedisServer& redis) {
  static const dlock::test::TempDir scratch;
  return scratch.write("example-" + std::to_string(redis.port()) + ".yaml",
                       "redis:\n  host: 127.0.0.1\n  port: " + std::to_string(redis.port()) +
                           "\nlogging:\n  level: warn\n");
}

long long field(const std::string& output, const std::string& name) {
  std::smatch match;
  REQUIRE(std::regex_search(output, match, std::regex(name + "=(-?[0-9]+)")));
  return std::stoll(match[1]);
}

}  // namespace

TEST_CASE("flash_sale with the lock sells exactly its stock across processes", "[examples]") {
  dlock::test::RedisServer redis;
  auto result = run(std::string(FLASH_SALE_BIN) + " --config " + config_for(redis) +
                    " --sku T1 --stock 60 --buyers 80 --threads 6 --processes 2 --reset");
  INFO(result.output);
  CHECK(result.status == 0);
  CHECK(field(result.output, "final_stock") == 0);
  CHECK(field(result.output, "sold") == 60);
  CHECK(field(result.output, "oversold") == 0);
  CHECK(redis.run({"GET", "stock:T1"}) == "0");
}

TEST_CASE("async_flash_sale: coroutines on one thread per process sell exactly the stock with the lock", "[examples][async]") {
  dlock::test::RedisServer redis;
  auto result = run(std::string(ASYNC_FLASH_SALE_BIN) + " --config " + config_for(redis) +
                    " --sku A1 --stock 60 --buyers 80 --coroutines 50 --processes 2 --reset");
  INFO(result.output);
  CHECK(result.status == 0);
  CHECK(field(result.output, "final_stock") == 0);
  CHECK(field(result.output, "sold") == 60);
  CHECK(field(result.output, "oversold") == 0);
  CHECK(redis.run({"EXISTS", "dlock:{stock:A1}"}) == "0");
}

TEST_CASE("async_flash_sale without the lock oversells (what the lock prevents)", "[examples][async]") {
  dlock::test::RedisServer redis;
  auto result = run(std::string(ASYNC_FLASH_SALE_BIN) + " --config " + config_for(redis) +
                    " --sku A2 --stock 60 --buyers 80 --coroutines 50 --processes 2 --reset --no-lock");
  INFO(result.output);
  CHECK(result.status == 0);
  CHECK(field(result.output, "oversold") > 0);
}

TEST_CASE("flash_sale --multi-sku fills every order whole and oversells no SKU across processes", "[examples][multi]") {
  dlock::test::RedisServer redis;
  auto result = run(std::string(FLASH_SALE_BIN) + " --config " + config_for(redis) +
                    " --multi-sku --sku M --stock 30 --buyers 120 --threads 4 --processes 3 --reset");
  INFO(result.output);
  CHECK(result.status == 0);
  CHECK(field(result.output, "oversold") == 0);
  CHECK(field(result.output, "torn") == 0);
  CHECK(field(result.output, "orders") > 0);
  // Five SKUs of 30: every unit is either still in stock or sold, once.
  CHECK(field(result.output, "final_stock") + field(result.output, "sold") == 150);
  CHECK(redis.run({"KEYS", "dlock:{stock:M-?}"}).empty());  // every multi-lock released (fence counters stay)
}

TEST_CASE("flash_sale --multi-sku without the lock shows the half-filled orders the multi-lock prevents",
          "[examples][multi]") {
  dlock::test::RedisServer redis;
  auto result = run(std::string(FLASH_SALE_BIN) + " --config " + config_for(redis) +
                    " --multi-sku --sku N --stock 200 --buyers 400 --threads 8 --processes 3 --reset --no-lock");
  INFO(result.output);
  CHECK(result.status == 0);  // without the lock a wrong tally is the point, not a failure
  CHECK(field(result.output, "torn") + field(result.output, "oversold") > 0);
}

TEST_CASE("flash_sale never pays through more calls at once than its payment slots, across processes",
          "[examples][semaphore]") {
  dlock::test::RedisServer redis;
  auto result = run(std::string(FLASH_SALE_BIN) + " --config " + config_for(redis) +
                    " --sku P1 --stock 90 --buyers 60 --threads 6 --processes 3 --payment-slots 3 --reset");
  INFO(result.output);
  CHECK(result.status == 0);
  CHECK(field(result.output, "payment_slots") == 3);
  CHECK(field(result.output, "payment_peak") <= 3);
  CHECK(field(result.output, "payment_peak") >= 1);
  CHECK(field(result.output, "sold") == 90);
  // Without the semaphore the same calls pile up past the slots: the peak is what the permits prevent.
  auto unlimited = run(std::string(FLASH_SALE_BIN) + " --config " + config_for(redis) +
                       " --sku P2 --stock 300 --buyers 100 --threads 8 --processes 3 --payment-slots 3 --reset --no-lock");
  INFO(unlimited.output);
  CHECK(field(unlimited.output, "payment_peak") > 3);
}

TEST_CASE("flash_sale processes started separately share one sale", "[examples]") {
  dlock::test::RedisServer redis;
  const std::string base = std::string(FLASH_SALE_BIN) + " --config " + config_for(redis) + " --sku T2 --threads 4";
  auto first = run(base + " --stock 50 --buyers 30 --reset");
  auto second = run(base + " --stock 999 --buyers 30");  // joins: the stock is not reset
  INFO(first.output << second.output);
  CHECK(first.status == 0);
  CHECK(second.status == 0);
  CHECK(field(second.output, "sold") == 50);
  CHECK(field(second.output, "final_stock") == 0);
  CHECK(field(second.output, "accepted") == 20);
}

TEST_CASE("flash_sale rejects an unknown option with usage and exit 64", "[examples]") {
  auto result = run(std::string(FLASH_SALE_BIN) + " --bogus");
  CHECK(result.status == 64);
  CHECK_THAT(result.output, Catch::Contains("usage: flash_sale"));
}

TEST_CASE("flash_sale reports an unreachable Redis with exit 69", "[examples]") {
  const dlock::test::TempDir scratch;
  const std::string path =
      scratch.write("unreachable.yaml", "redis:\n  port: " + std::to_string(dlock::test::free_loopback_port()) + "\n");
  auto result = run(std::string(FLASH_SALE_BIN) + " --config " + path);
  CHECK(result.status == 69);
  CHECK_THAT(result.output, Catch::Contains("127.0.0.1"));
}

TEST_CASE("scheduled_job runs the job exactly once per round across instances", "[examples]") {
  dlock::test::RedisServer redis;
  auto result = run(std::string(SCHEDULED_JOB_BIN) + " --config " + config_for(redis) +
                    " --job nightly --rounds 4 --period-ms 400 --processes 3");
  INFO(result.output);
  CHECK(result.status == 0);
  CHECK(field(result.output, "ran_once") == 4);
  CHECK(field(result.output, "duplicates") == 0);
  CHECK(field(result.output, "missed") == 0);
}

TEST_CASE("nested_reentrant prints hold counts 1, 2, 1, 0 and keeps out a second instance", "[examples]") {
  dlock::test::RedisServer redis;
  auto result = run(std::string(NESTED_REENTRANT_BIN) + " --config " + config_for(redis));
  INFO(result.output);
  CHECK(result.status == 0);
  std::vector<std::string> counts;
  std::regex pattern("hold_count=([0-9]+)");
  for (auto it = std::sregex_iterator(result.output.begin(), result.output.end(), pattern); it != std::sregex_iterator();
       ++it) {
    counts.push_back((*it)[1]);
  }
  CHECK(counts == std::vector<std::string>{"1", "2", "1", "0"});
  CHECK_THAT(result.output, Catch::Contains("during the outer hold: refused"));
  CHECK_THAT(result.output, Catch::Contains("after the release: acquired"));
}
