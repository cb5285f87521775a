// make_lock_service fails fast at start-up when Redis is unreachable or refuses.
#include <catch2/catch.hpp>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("an unreachable Redis fails make_lock_service with ConnectionError within the connect timeout",
          "[factory]") {
  dlock::Config config;
  config.redis.host = "127.0.0.1";
  config.redis.port = dlock::test::free_loopback_port();  // nobody listens there
  config.redis.connect_timeout = 500ms;
  auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(dlock::make_lock_service(config), dlock::ConnectionError);
  CHECK(dlock::test::elapsed_ms(started) < 500 + 1500);
  CHECK_THROWS_WITH(dlock::make_lock_service(config), Catch::Contains("127.0.0.1:" + std::to_string(config.redis.port)));
}

TEST_CASE("a wrong password fails make_lock_service saying authentication failed", "[factory]") {
  dlock::test::RedisServer redis({"--requirepass", "right"});
  dlock::Config config = redis.config();
  config.redis.password = "wrong";
  CHECK_THROWS_AS(dlock::make_lock_service(config), dlock::ConnectionError);
  CHECK_THROWS_WITH(dlock::make_lock_service(config), Catch::Contains("authentication failed"));
  config.redis.password = "right";
  auto service = dlock::make_lock_service(config);
  CHECK(service->lock("k"));
}

TEST_CASE("a Redis that stops answering fails make_lock_service within the timeouts", "[factory]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  dlock::Config config = redis.config();
  config.redis.connect_timeout = 300ms;
  config.redis.command_timeout = 300ms;
  // DEBUG SLEEP blocks the server: it accepts the connection but answers nothing.
  std::thread sleeper([&] { redis.run({"DEBUG", "SLEEP", "2"}); });
  std::this_thread::sleep_for(100ms);
  auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(dlock::make_lock_service(config), dlock::ConnectionError);
  CHECK(dlock::test::elapsed_ms(started) < 1900);
  sleeper.join();
}
