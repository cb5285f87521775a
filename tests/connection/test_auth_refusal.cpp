// A refused login is a setting to fix, not an outage to wait out: lock()
// says AuthenticationError at once, whatever its wait (fresh-eyes review of
// the default wait: a rotated password cost each caller its whole wait).
#include <catch2/catch.hpp>

#include <chrono>

#include "admin_connection.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("a login refused after a password rotation is not waited out by lock()", "[connection][auth]") {
  dlock::test::RedisServer redis({"--requirepass", "old"});
  dlock::test::AdminConnection admin(redis);
  REQUIRE(admin.run({"AUTH", "old"}) == "OK");
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.password = "old";
    c.lock.wait = 60s;
  });
  { auto warm = service->lock("auth:k"); }  // the pool has live, logged-in connections

  // The password is rotated and every connection but the admin's dropped: dlock must log in again.
  REQUIRE(admin.run({"CONFIG", "SET", "requirepass", "new"}) == "OK");
  admin.run({"CLIENT", "KILL", "TYPE", "normal"});
  admin.run({"CLIENT", "KILL", "TYPE", "pubsub"});

  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(service->lock("auth:k2"), dlock::AuthenticationError);
  // Not a speed figure: retried as an outage, the call would end with its 60 s wait.
  CHECK(dlock::test::elapsed_ms(started) < 30000);
}
