// dlock as a restricted Redis ACL user: the minimal rights documented in
// docs/operations.md run the whole lock cycle; a user missing a right gets a clear
// dlock::Error, never a wrong "acquired".
//
// What dlock sends: PING (connect check), AUTH, SELECT (only for a database
// other than 0), SCRIPT LOAD, EVALSHA, SUBSCRIBE, UNSUBSCRIBE, and SET and DEL
// of the service's registry entry (test_instance_registry.cpp). Redis 7 checks
// the commands a script runs against the user too: TYPE, EXISTS, GET, SET,
// INCR, DECR, HSET, HEXISTS, PEXPIRE, PTTL, DEL on the lock's keys, ZADD,
// ZSCORE, ZREM, ZRANGE on its line of waiters, TIME, and PUBLISH on its
// channel.
#include <catch2/catch.hpp>

#include <future>

#include <thread>

#include "readme_acl.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

namespace {

// docs/operations.md's minimal ACL line for prefix "dlock:", without the user name and password.
const std::vector<std::string> kMinimalRights = dlock::test::readme_minimal_acl();

void set_user(const dlock::test::RedisServer& redis, const std::string& name, std::vector<std::string> rights) {
  std::vector<std::string> argv = {"ACL", "SETUSER", name, "reset", "on", ">secret"};
  argv.insert(argv.end(), rights.begin(), rights.end());
  REQUIRE(redis.run(argv) == "OK");
}

auto as_user(const std::string& name) {
  return [name](dlock::Config& c) {
    c.redis.username = name;
    c.redis.password = "secret";
  };
}

std::vector<std::string> without(std::vector<std::string> rights, const std::string& dropped) {
  std::erase(rights, dropped);
  return rights;
}

}  // namespace

TEST_CASE("a user with only the minimal ACL of docs/operations.md runs the whole lock cycle", "[acl]") {
  dlock::test::RedisServer redis;
  set_user(redis, "locker", kMinimalRights);
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    as_user("locker")(c);
    c.lock.watchdog_timeout = 600ms;  // so renewals run during the test
  });
  auto other = dlock::test::make_service(redis, as_user("locker"));

  auto outer = service->lock("acl");
  auto inner = service->lock("acl");
  CHECK(service->hold_count("acl") == 2);
  // The service's registry entry was written as the user too.
  const std::string instance = redis.run({"HKEYS", "dlock:{acl}"}).substr(0, 32);
  CHECK(redis.run({"EXISTS", "dlock:instance:" + instance}) == "1");
  std::this_thread::sleep_for(800ms);  // a renewal or two, as the user
  CHECK(outer);

  bool got = false;
  long long waited_ms = 0;
  std::thread waiter([&] {
    const auto start = std::chrono::steady_clock::now();
    got = static_cast<bool>(other->lock("acl", {.wait = 10s}));
    waited_ms = dlock::test::elapsed_ms(start);
  });
  REQUIRE(dlock::test::await_line(redis, "acl", 1, 0ms));
  // A waiter of the holder's own instance: the release hands it the lock directly, as the user.
  bool got_locally = false;
  std::thread local_waiter([&] { got_locally = static_cast<bool>(service->lock("acl", {.wait = 10s})); });
  REQUIRE(dlock::test::await_line(redis, "acl", 2));
  inner.unlock();
  outer.unlock();
  local_waiter.join();
  waiter.join();
  CHECK(got_locally);
  CHECK(service->stats().handed_over == 1);
  CHECK(got);
  CHECK(waited_ms < 3000);  // woken by the release notice, which the user may publish
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{acl}"}));
  CHECK(redis.run({"GET", "dlock:{acl}:fence"}) == std::to_string(outer.fencing_token() + 2));
}

TEST_CASE("a user with only the minimal ACL of docs/operations.md uses multi-locks, read-write locks and semaphores",
          "[acl][multi][rwlock][semaphore]") {
  dlock::test::RedisServer redis;
  set_user(redis, "locker", kMinimalRights);
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    as_user("locker")(c);
    c.lock.watchdog_timeout = 600ms;  // so renewals run during the test
  });
  auto other = dlock::test::make_service(redis, as_user("locker"));
  auto all = service->lock_all({"acl:a", "acl:b"});
  auto reader = service->read_lock("acl:rw");
  auto inner_reader = service->read_lock("acl:rw");  // re-entered
  auto sem = service->semaphore("acl:sem", 2);
  auto permits = sem.acquire(2);
  std::this_thread::sleep_for(800ms);  // a renewal or two, as the user
  CHECK(all);
  CHECK(reader);
  CHECK(permits);
  CHECK(sem.available() == 0);
  // Waiters in line, woken by the releases' notices, as the user.
  auto writer = std::async(std::launch::async, [&] { return bool(other->write_lock("acl:rw", {.wait = 10s})); });
  auto permit = std::async(std::launch::async, [&] { return bool(other->semaphore("acl:sem").acquire(1, {.wait = 10s})); });
  std::this_thread::sleep_for(300ms);
  inner_reader.unlock();
  reader.unlock();
  permits.unlock();
  CHECK(writer.get());
  CHECK(permit.get());
  sem.set_permits(3);
  CHECK(sem.permits() == 3);
  all.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{acl:a}"}) == "0");
}

TEST_CASE("a user without rights on the lock keys gets a RedisError saying so", "[acl]") {
  dlock::test::RedisServer redis;
  set_user(redis, "nokeys", without(kMinimalRights, "~dlock:*"));
  auto service = dlock::test::make_service(redis, as_user("nokeys"));
  CHECK_THROWS_AS(service->lock("acl"), dlock::RedisError);
  CHECK_THROWS_WITH(service->try_lock("acl"), Catch::Contains("'acl'") && Catch::Contains("NOPERM") &&
                                                  Catch::Contains("may run EVALSHA on keys with prefix 'dlock:'"));
  CHECK(service->hold_count("acl") == 0);
  CHECK(redis.run({"EXISTS", "dlock:{acl}"}) == "0");
}

TEST_CASE("a user whose key pattern covers another prefix only is refused for dlock's keys", "[acl]") {
  dlock::test::RedisServer redis;
  auto rights = without(kMinimalRights, "~dlock:*");
  rights.push_back("~app:*");
  set_user(redis, "app", rights);
  auto service = dlock::test::make_service(redis, as_user("app"));
  CHECK_THROWS_AS(service->lock("x"), dlock::RedisError);
  // With lock.key_prefix inside its pattern the same user works.
  auto prefixed = dlock::test::make_service(redis, [](dlock::Config& c) {
    as_user("app")(c);
    c.lock.key_prefix = "app:lock:";
  });
  CHECK(prefixed->lock("x"));
}

TEST_CASE("a user that may not load scripts fails at start-up with a RedisError naming the command", "[acl]") {
  dlock::test::RedisServer redis;
  set_user(redis, "noscript", without(kMinimalRights, "+script|load"));
  CHECK_THROWS_AS(dlock::test::make_service(redis, as_user("noscript")), dlock::RedisError);
  CHECK_THROWS_WITH(dlock::test::make_service(redis, as_user("noscript")),
                    Catch::Contains("cannot load the acquire script") && Catch::Contains("SCRIPT"));
}

TEST_CASE("a user that may not run a command the scripts use gets a RedisError, never an acquired lock", "[acl]") {
  dlock::test::RedisServer redis;
  set_user(redis, "noincr", without(kMinimalRights, "+incr"));
  auto service = dlock::test::make_service(redis, as_user("noincr"));
  CHECK_THROWS_AS(service->lock("acl"), dlock::RedisError);
  CHECK(service->hold_count("acl") == 0);
  CHECK(redis.run({"EXISTS", "dlock:{acl}"}) == "0");  // checked before the first write
}

TEST_CASE("a user with a wrong password fails at start-up with ConnectionError", "[acl]") {
  dlock::test::RedisServer redis;
  set_user(redis, "locker", kMinimalRights);
  CHECK_THROWS_AS(dlock::test::make_service(redis, [](dlock::Config& c) {
                    c.redis.username = "locker";
                    c.redis.password = "wrong";
                  }),
                  dlock::ConnectionError);
}

TEST_CASE("a user without channel rights: release fails before it deletes anything", "[acl]") {
  // Redis checks a script's PUBLISH against the user's channel rights. The release script
  // publishes before it writes anything, so a refusal leaves the lock as it was, not half released.
  dlock::test::RedisServer redis;
  set_user(redis, "nochannels", without(kMinimalRights, "&dlock:*"));
  auto service = dlock::test::make_service(redis, as_user("nochannels"));
  auto guard = service->lock("acl");
  std::string error;
  try {
    guard.unlock();
  } catch (const dlock::Error& e) {
    error = e.what();
  }
  INFO(error);
  if (!error.empty()) CHECK_THAT(error, Catch::Contains("'acl'"));
  // Either the release worked and was reported as such, or it failed and changed nothing.
  CHECK((error.empty() ? redis.run({"EXISTS", "dlock:{acl}"}) == "0" : redis.run({"EXISTS", "dlock:{acl}"}) == "1"));
}

TEST_CASE("a user with the ACL of docs/operations.md keeps a watchdog-renewed lock across SCRIPT FLUSH", "[acl][watchdog]") {
  // On NOSCRIPT the watchdog loads the renew script again on its own connection, with SCRIPT LOAD
  // and EVALSHA (the ACL grants no EVAL).
  dlock::test::RedisServer redis;
  std::vector<std::string> argv = {"ACL", "SETUSER", "locker", "reset", "on", ">secret"};
  for (const auto& right : dlock::test::readme_minimal_acl()) argv.push_back(right);
  REQUIRE(redis.run(argv) == "OK");
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.username = "locker";
    c.redis.password = "secret";
    c.lock.watchdog_timeout = 600ms;
  });
  auto guard = service->lock("flushed");
  REQUIRE(redis.run({"SCRIPT", "FLUSH"}) == "OK");  // as after a restart, a failover or an operator's flush
  std::this_thread::sleep_for(1500ms);              // two and a half leases: several renewal rounds
  CHECK_FALSE(guard.lost());
  CHECK(service->stats().lost == 0);
  CHECK(std::stoll(redis.run({"PTTL", "dlock:{flushed}"})) > 0);  // still held in Redis
}
