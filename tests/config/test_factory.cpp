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

TEST_CASE("a service reads and writes its own data through the executor its locks use", "[factory]") {
  // As docs/getting-started.md shows: one executor (one pool) for the locks and the service's own keys.
  dlock::test::RedisServer redis;
  const dlock::Config config = redis.config();
  auto executor = std::make_shared<dlock::HiredisExecutor>(config.redis);
  executor->connect();
  auto locks = std::make_shared<dlock::RedisLockService>(executor, config.lock, dlock::make_logger(config.logging));
  REQUIRE(executor->command({"SET", "stock:42", "10"}).type == dlock::RedisReply::Type::Status);
  {
    DISTRIBUTED_LOCK_SERVICE(locks);
    WITH_DISTRIBUTED_LOCK_AS(guard, "stock:{}", 42) {
      const dlock::RedisReply stock = executor->command({"GET", "stock:42"});
      REQUIRE(stock.type == dlock::RedisReply::Type::String);
      executor->command({"SET", "stock:42", std::to_string(std::stoi(stock.str) - 1)});
      executor->command({"SET", "stock:42:fence", std::to_string(guard.fencing_token())});
    }
  }
  CHECK(redis.run({"GET", "stock:42"}) == "9");
  // An error reply is a reply, not an exception: the caller decides.
  executor->command({"SET", "text", "abc"});
  const dlock::RedisReply refused = executor->command({"INCR", "text"});
  CHECK(refused.is_error());
  CHECK_THAT(refused.str, Catch::Contains("not an integer"));
}
