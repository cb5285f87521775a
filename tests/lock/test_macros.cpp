// The block and scope forms: which service they use, that every way out of
// the block releases the lock, the named guard, options last, the skip-if-busy
// form, and a block that ends in LockLostError. The forms that must not
// compile are in compile_fail/.
#include <catch2/catch.hpp>


#include <sstream>

#include "captured_log.hpp"
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
  // A static member cannot reach the injected service by itself: it names one.
  static int restock(Inventory& inventory, const std::string& sku) {
    DISTRIBUTED_LOCK_SERVICE(inventory.lock_service());
    WITH_DISTRIBUTED_LOCK("stock:{}", sku) { return inventory.lock_service().hold_count("stock:" + sku); }
  }
  // A lambda that does not capture `this` names the service it captured.
  int in_lambda(const std::string& sku) {
    auto work = [service = &lock_service(), sku] {
      DISTRIBUTED_LOCK_SERVICE(service);
      WITH_DISTRIBUTED_LOCK("stock:{}", sku) { return service->hold_count("stock:" + sku); }
    };
    return work();
  }
  // A lambda that captures `this` uses the injected service as the member does.
  int in_capturing_lambda(const std::string& sku) {
    return [this, &sku] {
      WITH_DISTRIBUTED_LOCK("stock:{}", sku) { return lock_service().hold_count("stock:" + sku); }
    }();
  }
};

// Two scope locks from one line of a user's own macro.
#define LOCK_BOTH(first, second) \
  DISTRIBUTED_LOCK_SCOPE(first); \
  DISTRIBUTED_LOCK_SCOPE(second)

// A free function names its service rather than use the default.
int free_function(std::shared_ptr<dlock::RedisLockService> service) {
  DISTRIBUTED_LOCK_SERVICE(service);
  WITH_DISTRIBUTED_LOCK("free") { return service->hold_count("free"); }
}

// A log of its own, to count what the library says.
std::shared_ptr<dlock::RedisLockService> logged_service(const dlock::test::RedisServer& redis,
                                                        const dlock::test::CapturedLog& out,
                                                        dlock::Millis lease = dlock::Millis(30000)) {
  dlock::Config config = redis.config();
  config.lock.watchdog_timeout = lease;
  auto executor = std::make_shared<dlock::HiredisExecutor>(config.redis);
  executor->connect();
  return std::make_shared<dlock::RedisLockService>(executor, config.lock, out.logger("macros"));
}

int lines_containing(const std::string& text, const std::string& part) {
  std::istringstream lines(text);
  int count = 0;
  for (std::string line; std::getline(lines, line);) count += line.find(part) != std::string::npos ? 1 : 0;
  return count;
}

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
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{k}"}));
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
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{k}"}));

  for (int i = 0; i < 2; ++i) {
    WITH_DISTRIBUTED_LOCK("k") { continue; }
  }
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{k}"}));

  auto early_return = [&]() -> int {
    WITH_DISTRIBUTED_LOCK("k") { return 7; }
    return 0;
  };
  CHECK(early_return() == 7);
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{k}"}));

  CHECK_THROWS_AS(
      [&] {
        WITH_DISTRIBUTED_LOCK("k") { throw std::runtime_error("boom"); }
      }(),
      std::runtime_error);
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{k}"}));
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
    WITH_DISTRIBUTED_LOCK_OPTS("k", (dlock::LockOptions{.wait = 100ms})) { ran = true; }  // the older spelling
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
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{stock:42}", "dlock:{order:7:1001}", "dlock:{raw{}}"}));
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

TEST_CASE("WITH_DISTRIBUTED_LOCK_AS names the guard, for its fencing token", "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  dlock::set_default_lock_service(service);
  std::uint64_t token = 0;
  WITH_DISTRIBUTED_LOCK_AS(guard, "order:{}", 42) {
    token = guard.fencing_token();
    CHECK(guard.key() == "order:42");
    CHECK(redis.run({"GET", "dlock:{order:42}:fence"}) == std::to_string(token));
  }
  CHECK(token > 0);
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{order:42}"}));
  const std::string sku = "9";
  WITH_DISTRIBUTED_LOCK_AS(held, "stock:" + sku) { CHECK(held.key() == "stock:9"); }
}

TEST_CASE("options come last as designated initialisers, after a key or a template and its values", "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto holder = dlock::test::make_service(redis);
  dlock::set_default_lock_service(service);
  const std::string sku = "7";

  WITH_DISTRIBUTED_LOCK("stock:{}", sku, {.lease = 5s}) {
    const long long pttl = std::stoll(redis.run({"PTTL", "dlock:{stock:7}"}));
    CHECK(pttl > 0);
    CHECK(pttl <= 5000);  // the fixed lease, not the watchdog's 30 s
  }
  WITH_DISTRIBUTED_LOCK_OPTS("plain", {.wait = 100ms, .lease = 5s}) {
    CHECK(std::stoll(redis.run({"PTTL", "dlock:{plain}"})) <= 5000);
  }
  const dlock::LockOptions kept{.lease = 4s};  // a LockOptions value works as well
  WITH_DISTRIBUTED_LOCK("order:{}:{}", 1, 2, kept) { CHECK(std::stoll(redis.run({"PTTL", "dlock:{order:1:2}"})) <= 4000); }

  auto busy = holder->lock("stock:7");
  bool ran = false;
  CHECK_THROWS_AS([&] { WITH_DISTRIBUTED_LOCK("stock:{}", sku, {.wait = 100ms}) { ran = true; } }(),
                  dlock::LockTimeoutError);
  CHECK_FALSE(ran);
  CHECK(service->stats().timeouts == 1);
}

TEST_CASE("WITH_DISTRIBUTED_LOCK_IF_FREE runs the body when the lock is free and the else branch when busy",
          "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto holder = dlock::test::make_service(redis);
  dlock::set_default_lock_service(service);
  const std::string job = "nightly";
  int ran = 0, skipped = 0;
  WITH_DISTRIBUTED_LOCK_IF_FREE("job:{}", job) { ++ran; }
  else {
    ++skipped;
  }
  CHECK(ran == 1);
  CHECK(skipped == 0);

  auto busy = holder->lock("job:nightly");
  WITH_DISTRIBUTED_LOCK_IF_FREE("job:{}", job) { ++ran; }
  else {
    ++skipped;
  }
  CHECK(ran == 1);
  CHECK(skipped == 1);
  CHECK(service->stats().busy == 1);  // tried once: a busy try, not a timed-out wait
  CHECK(service->stats().timeouts == 0);
  WITH_DISTRIBUTED_LOCK_IF_FREE("job:{}", job) { ++ran; }  // no else: nothing runs
  CHECK(ran == 1);

  // With a wait, it waits that long first; the named guard may be detached ("lock at least for").
  busy.unlock();
  WITH_DISTRIBUTED_LOCK_IF_FREE_AS(guard, "job:{}", job, {.wait = 1s, .lease = 5s}) { guard.detach(); }
  CHECK(redis.run({"EXISTS", "dlock:{job:nightly}"}) == "1");
}

TEST_CASE("with throw_if_lost a block whose lock was lost during the body ends in LockLostError", "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  dlock::test::CapturedLog log;
  auto service = logged_service(redis, log);
  dlock::set_default_lock_service(service);
  // A forced unlock mid-body, before the watchdog (30 s lease) could notice: only the release finds out.
  auto forced_unlock = [&] { REQUIRE(redis.run({"DEL", "dlock:{k}"}) == "1"); };
  bool finished = false;
  CHECK_THROWS_AS(
      [&] {
        WITH_DISTRIBUTED_LOCK("k", {.throw_if_lost = true}) {
          forced_unlock();
          finished = true;
        }
      }(),
      dlock::LockLostError);
  CHECK(finished);
  CHECK(lines_containing(log.str(), "lost") == 1);  // found once, logged once

  // Without it the block ends as usual and the loss is a log line.
  CHECK_NOTHROW([&] { WITH_DISTRIBUTED_LOCK("k") { forced_unlock(); } }());
  // Found by the release, whose reply is read off this thread after the block's exit.
  CHECK(dlock::test::eventually([&] { return lines_containing(log.str(), "lost") == 2; }));

  // An exception from the body is the one that leaves; the loss adds none.
  CHECK_THROWS_AS(
      [&] {
        WITH_DISTRIBUTED_LOCK("k", {.throw_if_lost = true}) {
          forced_unlock();
          throw std::out_of_range("the body's own");
        }
      }(),
      std::out_of_range);

  // A return from the body leaves through the release as well.
  auto early_return = [&]() -> int {
    WITH_DISTRIBUTED_LOCK_AS(guard, "k", {.throw_if_lost = true}) {
      forced_unlock();
      return 7;
    }
    return 0;
  };
  CHECK_THROWS_AS(early_return(), dlock::LockLostError);

  // The scope form too; and a lock that stayed held ends quietly.
  CHECK_THROWS_AS(
      [&] {
        DISTRIBUTED_LOCK_SCOPE("k", {.throw_if_lost = true});
        forced_unlock();
      }(),
      dlock::LockLostError);
  CHECK_NOTHROW([&] { WITH_DISTRIBUTED_LOCK("k", {.throw_if_lost = true}) {} }());
  CHECK(redis.run({"EXISTS", "dlock:{k}"}) == "0");
}

TEST_CASE("check() throwing inside a block is the only report besides the one log line of the loss", "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  dlock::test::CapturedLog log;
  auto service = logged_service(redis, log, 600ms);
  dlock::set_default_lock_service(service);
  CHECK_THROWS_AS(
      [&] {
        WITH_DISTRIBUTED_LOCK_AS(guard, "k") {
          REQUIRE(redis.run({"DEL", "dlock:{k}"}) == "1");
          REQUIRE(dlock::test::eventually([&] { return guard.lost(); }, 5000ms));  // the watchdog found it
          guard.check();
        }
      }(),
      dlock::LockLostError);
  INFO(log.str());
  CHECK(lines_containing(log.str(), "lost") == 1);
  CHECK(lines_containing(log.str(), "destructor") == 0);
}

TEST_CASE("two scope locks from one line of a user's macro both hold to the end of the scope", "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  dlock::set_default_lock_service(dlock::test::make_service(redis));
  {
    LOCK_BOTH("a", "b");
    CHECK(redis.run({"EXISTS", "dlock:{a}", "dlock:{b}"}) == "2");
  }
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{a}", "dlock:{b}"}));
}

TEST_CASE("DISTRIBUTED_LOCK_SERVICE names the service for static members, lambdas and free functions",
          "[macros]") {
  DefaultServiceReset reset;
  dlock::test::RedisServer redis;
  auto injected = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.key_prefix = "injected:"; });
  // A default with another prefix: a form that fell back to it would leave its keys there.
  dlock::set_default_lock_service(dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.key_prefix = "default:"; }));
  Inventory inventory(injected);
  CHECK(Inventory::restock(inventory, "1") == 1);
  CHECK(inventory.in_lambda("2") == 1);
  CHECK(inventory.in_capturing_lambda("3") == 1);
  CHECK(free_function(injected) == 1);
  for (const char* key : {"stock:1", "stock:2", "stock:3", "free"}) {
    INFO(key);
    CHECK(redis.run({"EXISTS", std::string("injected:{") + key + "}:fence"}) == "1");
    CHECK(redis.run({"EXISTS", std::string("default:{") + key + "}:fence"}) == "0");
  }
  // A null service is refused before the body runs.
  std::shared_ptr<dlock::RedisLockService> none;
  CHECK_THROWS_AS([&] { DISTRIBUTED_LOCK_SERVICE(none); }(), dlock::InvalidArgument);
}
