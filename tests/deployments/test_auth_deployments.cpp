// A refused login over a Redis Cluster and a Redlock is an AuthenticationError,
// as over one server and Sentinel (fresh-eyes review: the cluster's slot map
// request and a Redlock's nodes after start-up said a plain ConnectionError).
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "admin_connection.hpp"
#include "dlock/factory.hpp"
#include "redis_cluster.hpp"
#include "redlock_nodes.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("a cluster that wants a password none was given for says AuthenticationError", "[auth][cluster]") {
  dlock::test::RedisCluster cluster(3, 0);
  cluster.wait_healthy();
  for (const auto& node : cluster.nodes()) REQUIRE(node->run({"CONFIG", "SET", "requirepass", "s3cret"}) == "OK");
  const dlock::Config config = cluster.config();  // no redis.password
  try {
    (void)dlock::make_executor(config.redis);
    FAIL("connected without a password");
  } catch (const dlock::AuthenticationError& e) {
    CHECK_THAT(std::string(e.what()), Contains("authentication failed"));
  } catch (const dlock::ConnectionError& e) {
    FAIL("a plain ConnectionError: " << e.what());
  }
}

TEST_CASE("a Redlock whose nodes refuse the login after start-up says AuthenticationError", "[auth][redlock]") {
  dlock::test::RedlockNodes nodes(3);
  std::vector<std::unique_ptr<dlock::test::AdminConnection>> admins;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    admins.push_back(std::make_unique<dlock::test::AdminConnection>(nodes[i]));
    REQUIRE(admins.back()->run({"CONFIG", "SET", "requirepass", "old"}) == "OK");
  }
  dlock::Config config = nodes.config();
  config.redis.password = "old";
  auto service = dlock::make_lock_service(config);
  { auto warm = service->lock("auth:k", {.wait = 0ms}); }

  for (auto& admin : admins) {
    REQUIRE(admin->run({"CONFIG", "SET", "requirepass", "new"}) == "OK");
    admin->run({"CLIENT", "KILL", "TYPE", "normal"});
    admin->run({"CLIENT", "KILL", "TYPE", "pubsub"});
  }
  try {
    (void)service->lock("auth:k2", {.wait = 20s});
    FAIL("granted with every node refusing the login");
  } catch (const dlock::AuthenticationError& e) {
    CHECK_THAT(std::string(e.what()), Contains("refused the login"));
  } catch (const dlock::ConnectionError& e) {
    FAIL("a plain ConnectionError: " << e.what());
  }
}
