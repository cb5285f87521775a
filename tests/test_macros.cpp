// WITH_DISTRIBUTED_LOCK and DISTRIBUTED_LOCK_SCOPE: which service they use,
// and that every way out of the block releases the lock.
#include <catch2/catch.hpp>

#include "services.hpp"

using namespace std::chrono_literals;

namespace {

// Clears the default service when a test ends, whatever happens.
struct DefaultServiceReset {
  ~DefaultServiceReset() { dlock::set_default_lock_service(nullptr); }
};

class Inventory : public dlock::LockAware {
 public:
  using LockAware::LockAware;
  int deduct(const std::string& sku) {
    WITH_DISTRIBUTED_LOCK("stock:" + sku) { return lock_service().hold_count("stock:" + sku); }
  }
  int scoped(const std::string& sku) {
    DISTRIBUTED_LOCK_SCOPE("stock:" + sku);
    return lock_service().hold_count("stock:" + sku);
  }
};

}  // namespace

TEST_CASE("outside a LockAware class the macros use the default service", "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  dlock::set_default_lock_service(service);
  int depth = 0;
  WITH_DISTRIBUTED_LOCK("k") {
    depth = service->hold_count("k");
    CHECK(redis.run({"EXISTS", "dlock:{k}"}) == "1");
  }
  CHECK(depth == 1);
  CHECK(redis.run({"EXISTS", "dlock:{k}"}) == "0");
}

TEST_CASE("inside a LockAware class the macros use the injected service, not the default", "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  auto injected = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.key_prefix = "injected:"; });
  dlock::set_default_lock_service(nullptr);
  Inventory inventory(injected);
  CHECK(inventory.deduct("42") == 1);
  CHECK(inventory.scoped("42") == 1);
  CHECK(redis.run({"EXISTS", "injected:{stock:42}:fence"}) == "1");
  CHECK(redis.run({"EXISTS", "dlock:{stock:42}:fence"}) == "0");
}

TEST_CASE("a macro with no service available throws dlock::Error before the body runs", "[macros]") {
  DefaultServiceReset reset;
  dlock::set_default_lock_service(nullptr);
  bool ran = false;
  auto use = [&] {
    WITH_DISTRIBUTED_LOCK("k") { ran = true; }
  };
  CHECK_THROWS_AS(use(), dlock::Error);
  CHECK_THROWS_WITH(use(), Catch::Contains("set_default_lock_service"));
  CHECK_FALSE(ran);
}

TEST_CASE("break, continue, return and exceptions inside the block release the lock", "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  dlock::set_default_lock_service(service);
  auto held = [&] { return redis.run({"EXISTS", "dlock:{k}"}) == "1"; };

  for (int i = 0; i < 3; ++i) {
    WITH_DISTRIBUTED_LOCK("k") {
      REQUIRE(held());
      break;
    }
  }
  CHECK_FALSE(held());

  for (int i = 0; i < 2; ++i) {
    WITH_DISTRIBUTED_LOCK("k") { continue; }
  }
  CHECK_FALSE(held());

  auto early_return = [&]() -> int {
    WITH_DISTRIBUTED_LOCK("k") { return 7; }
    return 0;
  };
  CHECK(early_return() == 7);
  CHECK_FALSE(held());

  CHECK_THROWS_AS(
      [&] {
        WITH_DISTRIBUTED_LOCK("k") { throw std::runtime_error("boom"); }
      }(),
      std::runtime_error);
  CHECK_FALSE(held());
}

TEST_CASE("a busy lock makes the block throw LockTimeoutError without running the body", "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto holder = dlock::test::make_service(redis);
  dlock::set_default_lock_service(service);
  auto guard = holder->lock("k");
  bool ran = false;
  auto use = [&] {
    WITH_DISTRIBUTED_LOCK_OPTS("k", (dlock::LockOptions{.wait = 100ms})) { ran = true; }
  };
  CHECK_THROWS_AS(use(), dlock::LockTimeoutError);
  CHECK_FALSE(ran);
}

TEST_CASE("macros build keys from fmt templates and take plain keys as they are", "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  dlock::set_default_lock_service(dlock::test::make_service(redis));
  const std::string sku = "42";
  WITH_DISTRIBUTED_LOCK("stock:{}", sku) { CHECK(redis.run({"EXISTS", "dlock:{stock:42}"}) == "1"); }
  {
    DISTRIBUTED_LOCK_SCOPE("order:{}:{}", 7, 1001);
    CHECK(redis.run({"EXISTS", "dlock:{order:7:1001}"}) == "1");
  }
  // One argument is never a template: its braces are part of the key.
  WITH_DISTRIBUTED_LOCK(std::string("raw{}")) { CHECK(redis.run({"EXISTS", "dlock:{raw{}}"}) == "1"); }
  CHECK(dlock::lock_key("a:{}:{}", "x", 3) == "a:x:3");
  CHECK(dlock::lock_key("{}") == "{}");
  CHECK(redis.run({"EXISTS", "dlock:{stock:42}", "dlock:{order:7:1001}", "dlock:{raw{}}"}) == "0");
}

TEST_CASE("an else after an if holding a macro block binds to the user's if", "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  dlock::set_default_lock_service(dlock::test::make_service(redis));
  int path = 0;
  bool condition = false;
  if (condition)
    WITH_DISTRIBUTED_LOCK("k") { path = 1; }
  else
    path = 2;
  CHECK(path == 2);
}
