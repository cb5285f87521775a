// Locks over TLS (redis.tls): every connection of a service — the pool, the
// watchdog's own, the subscriber's — speaks TLS to a server with tls-port.
#include <spdlog/sinks/ostream_sink.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <sstream>
#include <thread>

#include "deployment_yaml.hpp"
#include "dlock/subscriber.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using dlock::test::RedisServer;
using dlock::test::ServerTls;

TEST_CASE("a lock is taken, re-entered and released over TLS", "[tls]") {
  RedisServer redis({}, ServerTls{});
  auto service = dlock::test::make_service(redis);
  {
    auto outer = service->lock("tls:k");
    REQUIRE(outer);
    auto inner = service->lock("tls:k");
    CHECK(service->hold_count("tls:k") == 2);
    CHECK(redis.run({"HLEN", "dlock:{tls:k}"}) == "1");
  }
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{tls:k}"}));
}

TEST_CASE("a waiter is woken by the release notice over TLS", "[tls]") {
  RedisServer redis({}, ServerTls{});
  auto holder = dlock::test::make_service(redis);
  auto waiter = dlock::test::make_service(redis);
  auto held = holder->lock("tls:wake");
  std::atomic<bool> acquired{false};
  std::thread waiting([&] {
    auto guard = waiter->lock("tls:wake", {.wait = dlock::Millis(10000)});
    acquired = static_cast<bool>(guard);
  });
  REQUIRE(dlock::test::await_line(redis, "tls:wake", 1));
  const auto released = std::chrono::steady_clock::now();
  held.unlock();
  waiting.join();
  CHECK(acquired);
  CHECK(dlock::test::elapsed_ms(released) < 1000);
}

TEST_CASE("the watchdog renews a lock over TLS", "[tls]") {
  RedisServer redis({}, ServerTls{});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 600ms; });
  auto guard = service->lock("tls:renewed");
  std::this_thread::sleep_for(2000ms);  // more than three leases
  CHECK_FALSE(guard.lost());
  CHECK(std::stoll(redis.run({"PTTL", "dlock:{tls:renewed}"})) > 0);
}

TEST_CASE("a server that demands a client certificate accepts the configured one", "[tls]") {
  RedisServer redis({}, ServerTls{.auth_clients = true});
  auto service = dlock::test::make_service(redis);
  CHECK(service->lock("tls:mutual"));
}

TEST_CASE("server_name checks the certificate against another name than the host dialled", "[tls]") {
  RedisServer redis({}, ServerTls{.certificate = "wrong-name"});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.redis.tls.server_name = "wrong-name.example"; });
  CHECK(service->lock("tls:named"));
}

TEST_CASE("verify: false connects to a misnamed certificate and warns once", "[tls]") {
  RedisServer redis({}, ServerTls{.certificate = "wrong-name"});
  std::ostringstream log;
  auto logger = std::make_shared<spdlog::logger>("tls-test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  dlock::Config config = redis.config();
  config.redis.tls.verify = false;
  config.redis.tls.ca_file.clear();
  auto service = dlock::make_lock_service(config, logger);
  CHECK(service->lock("tls:unverified"));
  CHECK_THAT(log.str(), Catch::Contains("redis.tls.verify is false"));
  auto again = dlock::make_lock_service(config, logger);
  const std::string text = log.str();
  CHECK(text.find("verify is false") == text.rfind("verify is false"));
}

TEST_CASE("the subscriber reconnects over TLS after the server was killed", "[tls]") {
  RedisServer redis({}, ServerTls{});
  dlock::detail::Subscriber subscriber(redis.config().redis);
  std::atomic<int> calls{0};
  auto subscription = subscriber.subscribe("tls:channel", [&](const std::string&) { ++calls; });
  redis.run({"PUBLISH", "tls:channel", "1"});
  REQUIRE(dlock::test::eventually([&] { return calls == 1; }));
  redis.kill();
  std::this_thread::sleep_for(300ms);
  redis.start();
  CHECK(dlock::test::eventually([&] { return calls == 2; }));  // the reconnect notice
  CHECK(dlock::test::eventually([&] { return redis.run({"PUBSUB", "NUMSUB", "tls:channel"}) == "tls:channel 1"; }));
  redis.run({"PUBLISH", "tls:channel", "2"});
  CHECK(dlock::test::eventually([&] { return calls == 3; }));
}

TEST_CASE("pooled TLS connections survive a server restart", "[tls]") {
  RedisServer redis({}, ServerTls{});
  auto service = dlock::test::make_service(redis);
  CHECK(service->lock("tls:before"));
  redis.stop();
  redis.start();
  // The idle connections were closed by the restart: the pool drops them and dials again.
  CHECK(service->lock("tls:after"));
}

TEST_CASE("review: a pipeline of thousands of commands over TLS comes back in order", "[tls]") {
  dlock::test::RedisServer redis({}, dlock::test::ServerTls{});
  auto executor = dlock::make_executor(redis.config().redis);
  std::vector<dlock::RedisCommand> commands;
  for (int i = 0; i < 1000; ++i) {  // 4 MB each way: far more than a socket buffer or a TLS record
    commands.push_back({"SET", "big:" + std::to_string(i), std::string(2000, static_cast<char>('a' + i % 26))});
    commands.push_back({"GET", "big:" + std::to_string(i)});
  }
  const auto replies = executor->pipeline(commands);
  REQUIRE(replies.size() == commands.size());
  int wrong = 0;
  for (int i = 0; i < 1000; ++i) {
    if (replies[2 * i].str != "OK" || replies[2 * i + 1].str != commands[2 * i][2]) ++wrong;
  }
  CHECK(wrong == 0);
  CHECK(executor->command({"PING"}).str == "PONG");
}

TEST_CASE("review: the watchdog renews 400 locks over TLS", "[tls]") {
  dlock::test::RedisServer redis({}, dlock::test::ServerTls{});
  dlock::Config config = redis.config();
  config.lock.watchdog_timeout = 900ms;
  auto service = dlock::make_lock_service(config);
  std::vector<dlock::LockGuard> guards;
  for (int i = 0; i < 400; ++i) guards.push_back(service->lock("many:" + std::to_string(i)));
  std::this_thread::sleep_for(2500ms);
  int lost = 0;
  for (auto& guard : guards) lost += guard.lost() ? 1 : 0;
  CHECK(lost == 0);
}

#ifdef FLASH_SALE_BIN  // the examples are built
TEST_CASE("flash_sale and the dlock command work over TLS from a YAML file", "[tls]") {
  RedisServer redis({}, ServerTls{});
  const dlock::test::TempDir files;
  const std::string yaml = files.write("tls.yaml", dlock::test::deployment_yaml(redis.config().redis));
  REQUIRE_THAT(dlock::test::read_file(yaml), Catch::Contains("enabled: true"));
  dlock::test::check_examples_and_cli(yaml, "TLS");
  CHECK(redis.run({"GET", "stock:TLS"}) == "0");
}
#endif
