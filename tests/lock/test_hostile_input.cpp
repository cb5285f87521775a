// Hostile and bad input: odd keys, other programs' data at a lock's names,
// guards and unlock() used in every wrong order, and config files built to
// hurt the loader. Each gets a defined answer: it works, or a dlock::Error
// that names what is wrong. (Empty and over-long keys, NUL bytes and
// script-like keys are in test_arguments.cpp and test_scripts.cpp.)
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "services.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST_CASE("keys of invalid UTF-8, control characters and protocol bytes are locked byte for byte", "[hostile]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  const std::vector<std::string> keys = {
      std::string("\xc0\x80", 2),            // overlong NUL
      std::string("\xed\xa0\x80", 3),        // UTF-16 surrogate
      std::string("\x80\x80\xfe\xff", 4),    // stray continuation bytes, never-valid bytes
      std::string("\r\n*1\r\n$8\r\nFLUSHALL\r\n"),
      std::string("\x1b[2J\x07", 5),         // terminal escapes in a log line
      std::string("{"), std::string("}"), std::string(":fence"), std::string("x}:released"),
      std::string(1024, '\xff'),             // exactly lock.max_key_bytes, none of it text
  };
  for (const auto& key : keys) {
    INFO("key of " << key.size() << " bytes");
    auto guard = service->lock(key);
    CHECK(guard);
    CHECK(guard.key() == key);
    CHECK(redis.run({"EXISTS", "dlock:{" + key + "}"}) == "1");
    CHECK_FALSE(other->try_lock(key));
    guard.unlock();
    CHECK(redis.run({"EXISTS", "dlock:{" + key + "}"}) == "0");
  }
  // Similar-looking keys are different locks.
  auto a = service->lock(std::string("k\0a", 3));
  auto b = other->lock(std::string("k\0b", 3));
  CHECK(a);
  CHECK(b);
  CHECK(redis.run({"DBSIZE"}) != "0");
}

TEST_CASE("an error about a binary key shows it escaped and bounded", "[hostile]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const std::string key = std::string("\x01\n\xff", 3) + std::string(300, 'z');
  redis.run({"SET", "dlock:{" + key + "}", "user data"});
  std::string message;
  try {
    service->lock(key);
  } catch (const dlock::RedisError& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Contains("\\x01\\x0a\\xff"));
  CHECK(message.find('\n') == std::string::npos);
  CHECK(message.size() < 2000);
}

TEST_CASE("another program's data at a lock's names is a RedisError naming the key, and is left alone", "[hostile]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  redis.run({"RPUSH", "dlock:{l}:fence", "a", "b"});
  redis.run({"HSET", "dlock:{h}:fence", "f", "1"});
  redis.run({"SADD", "dlock:{s}", "member"});
  redis.run({"SET", "dlock:{n}:fence", "-3"});
  redis.run({"SET", "dlock:{big}:fence", "12345678901234567890"});
  redis.run({"SET", "dlock:{zeros}:fence", "007"});                // INCR refuses leading zeros
  redis.run({"SET", "dlock:{max}:fence", "9223372036854775807"});  // and going past 2^63-1
  for (const std::string key : {"l", "h", "s", "n", "big", "zeros", "max"}) {
    INFO(key);
    CHECK_THROWS_AS(service->lock(key), dlock::RedisError);
    CHECK_THROWS_WITH(service->try_lock(key), Catch::Contains("'" + key + "'") && Catch::Contains("not a dlock lock"));
    CHECK(service->hold_count(key) == 0);
    CHECK(service->watched_locks() == 0);
  }
  CHECK(redis.run({"LRANGE", "dlock:{l}:fence", "0", "-1"}) == "a b");
  CHECK(redis.run({"TYPE", "dlock:{s}"}) == "set");
  CHECK(redis.run({"EXISTS", "dlock:{l}"}) == "0");  // no half-made lock
  CHECK(redis.run({"GET", "dlock:{n}:fence"}) == "-3");
  CHECK(redis.run({"GET", "dlock:{zeros}:fence"}) == "007");
  CHECK(redis.run({"EXISTS", "dlock:{zeros}", "dlock:{max}"}) == "0");
}

TEST_CASE("another program's data at a lock's line is a RedisError for the waiter, and is left alone", "[hostile]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiter = dlock::test::make_service(redis);
  for (const std::string suffix : {"queue", "alive"}) {
    INFO(suffix);
    const std::string key = "line-" + suffix;
    auto guard = holder->lock(key);
    redis.run({"RPUSH", "dlock:{" + key + "}:" + suffix, "a", "b"});
    CHECK_THROWS_WITH(waiter->lock(key, {.wait = 300ms}),
                      Catch::Contains("'" + key + "'") && Catch::Contains("not a dlock lock"));
    CHECK(redis.run({"LRANGE", "dlock:{" + key + "}:" + suffix, "0", "-1"}) == "a b");
    CHECK(redis.run({"HLEN", "dlock:{" + key + "}"}) == "1");  // the holder's lock untouched
    CHECK(waiter->hold_count(key) == 0);
  }
}

TEST_CASE("another program's data at a lock's turn fails the release that would hand it, and is left alone",
          "[hostile]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiter = dlock::test::make_service(redis);
  auto guard = holder->lock("turned");
  auto waiting = std::async(std::launch::async, [&] { return static_cast<bool>(waiter->try_lock("turned", {.wait = 1500ms})); });
  REQUIRE(dlock::test::await_line(redis, "turned", 1));
  redis.run({"RPUSH", "dlock:{turned}:turn", "a", "b"});
  CHECK_THROWS_WITH(guard.unlock(), Catch::Contains("'turned'") && Catch::Contains("not a dlock lock"));
  CHECK(redis.run({"LRANGE", "dlock:{turned}:turn", "0", "-1"}) == "a b");
  // Nothing half done: the lock was not freed without its turn handed on.
  CHECK(redis.run({"EXISTS", "dlock:{turned}"}) == "1");
  CHECK_FALSE(waiting.get());
}

TEST_CASE("a user's own hash at a lock's name reads as held by someone else, never as acquired", "[hostile]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  redis.run({"HSET", "dlock:{u}", "name", "alice"});  // no TTL: it never expires
  CHECK_FALSE(service->try_lock("u"));
  CHECK_THROWS_AS(service->lock("u", {.wait = 300ms}), dlock::LockTimeoutError);
  CHECK_THROWS_WITH(service->lock("u", {.wait = 100ms}), Catch::Contains("'u'"));
  CHECK(service->hold_count("u") == 0);
  CHECK_THROWS_AS(service->unlock("u"), dlock::NotOwnerError);
  CHECK(redis.run({"HGETALL", "dlock:{u}"}) == "name alice");
}

TEST_CASE("a held lock overwritten by another program's string fails its release with a RedisError", "[hostile]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("over");
  redis.run({"SET", "dlock:{over}", "clobbered"});
  CHECK_THROWS_AS(guard.unlock(), dlock::Error);
  CHECK(redis.run({"GET", "dlock:{over}"}) == "clobbered");
  CHECK(service->hold_count("over") == 0);
}

TEST_CASE("a held lock overwritten by another program's string is lost at the next renewal", "[hostile]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 600ms; });
  auto guard = service->lock("over2");
  redis.run({"SET", "dlock:{over2}", "clobbered"});
  CHECK(dlock::test::eventually([&] { return guard.lost(); }, 3000ms));
  CHECK_THROWS_AS(guard.unlock(), dlock::LockLostError);
  CHECK(redis.run({"GET", "dlock:{over2}"}) == "clobbered");
}

TEST_CASE("fencing tokens stay exact and strictly growing past 2^53", "[hostile]") {
  // Lua numbers are doubles: a token passed through one would be rounded beyond 2^53, and two
  // acquisitions could get the same token. The scripts return it as text.
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  redis.run({"SET", "dlock:{f}:fence", "9007199254740991"});  // 2^53 - 1
  std::uint64_t first = 0;
  {
    auto guard = service->lock("f");
    first = guard.fencing_token();
  }
  auto guard = service->lock("f");
  CHECK(first == 9007199254740992ULL);
  CHECK(guard.fencing_token() == 9007199254740993ULL);
  CHECK(guard.fencing_token() > first);
  CHECK(redis.run({"GET", "dlock:{f}:fence"}) == std::to_string(guard.fencing_token()));
}

TEST_CASE("an inner guard moved to another thread and released there leaves the outer hold with its thread",
          "[hostile]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto outer = service->lock("mv");
  auto inner = service->lock("mv");
  std::thread([g = std::move(inner)]() mutable { g.unlock(); }).join();
  CHECK_FALSE(inner);  // NOLINT: moved-from is defined as empty
  CHECK(service->hold_count("mv") == 1);
  CHECK(redis.run({"HVALS", "dlock:{mv}"}) == "1");
  // unlock(key) now finds the outer hold, the only one left.
  service->unlock("mv");
  CHECK_FALSE(outer);
  CHECK(redis.run({"EXISTS", "dlock:{mv}"}) == "0");
  CHECK_THROWS_AS(service->unlock("mv"), dlock::NotOwnerError);
}

TEST_CASE("a guard emptied by unlock(key) and then unlocked again changes nothing", "[hostile]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto outer = service->lock("twice");
  auto inner = service->lock("twice");
  service->unlock("twice");  // releases inner's hold
  CHECK_NOTHROW(inner.unlock());
  CHECK_NOTHROW(inner.unlock());
  CHECK(service->hold_count("twice") == 1);
  CHECK(redis.run({"HVALS", "dlock:{twice}"}) == "1");
  outer.unlock();
  CHECK_NOTHROW(outer.unlock());
  CHECK(redis.run({"EXISTS", "dlock:{twice}"}) == "0");
}

TEST_CASE("unlock(key) after the lock was lost throws LockLostError once, then NotOwnerError", "[hostile]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 600ms; });
  auto guard = service->lock("gone");
  redis.run({"DEL", "dlock:{gone}"});
  REQUIRE(dlock::test::eventually([&] { return guard.lost(); }, 3000ms));
  CHECK(service->hold_count("gone") == 0);
  CHECK_THROWS_AS(service->unlock("gone"), dlock::LockLostError);
  CHECK_THROWS_AS(service->unlock("gone"), dlock::NotOwnerError);
  CHECK_NOTHROW(guard.unlock());  // already released by unlock(key)
}

TEST_CASE("taking a key again after its lock was lost gives a fresh hold the old guard cannot release",
          "[hostile]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 600ms; });
  auto old = service->lock("again");
  redis.run({"DEL", "dlock:{again}"});
  REQUIRE(dlock::test::eventually([&] { return old.lost(); }, 3000ms));
  auto fresh = service->lock("again");
  CHECK(fresh);
  CHECK(service->hold_count("again") == 1);
  CHECK(fresh.fencing_token() > old.fencing_token());
  { dlock::LockGuard dropped = std::move(old); }  // its destructor logs the loss, touches nothing
  CHECK(fresh);
  CHECK(redis.run({"HVALS", "dlock:{again}"}) == "1");
  CHECK(service->hold_count("again") == 1);
  fresh.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{again}"}) == "0");
}

TEST_CASE("move-assigning over a held guard releases what it held", "[hostile]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("first");
  guard = service->lock("second");
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{first}"}));
  CHECK(redis.run({"EXISTS", "dlock:{second}"}) == "1");
  guard = std::move(guard);  // self-move keeps the hold
  CHECK(redis.run({"EXISTS", "dlock:{second}"}) == "1");
  guard = dlock::LockGuard{};
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{second}"}));
}

// Config files built to hurt the loader: each is a ConfigError that starts with FILE:LINE:,
// never a crash, a hang or another exception. (Size limit, overflow, wrong types and duplicate
// keys are in test_config.cpp.)
namespace {

struct ConfigFile {
  ConfigFile(const std::string& name, const std::string& text) : path(fs::temp_directory_path() / name) {
    path += "." + std::to_string(::getpid()) + ".yaml";
    std::ofstream(path, std::ios::binary) << text;
  }
  ~ConfigFile() {
    std::error_code ignored;
    fs::remove(path, ignored);
  }
  fs::path path;
};

std::string config_error(const fs::path& path) {
  try {
    dlock::load_config(path);
  } catch (const dlock::ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("a deeply nested config file is a ConfigError, not a stack overflow", "[hostile][config]") {
  ConfigFile flow("dlock-deep-flow", "redis: " + std::string(100000, '[') + std::string(100000, ']') + "\n");
  CHECK_THAT(config_error(flow.path), Catch::StartsWith(flow.path.string() + ":"));
  std::string block = "redis:\n";
  for (int i = 0; i < 3000; ++i) block += std::string(2 * (i + 1), ' ') + "k" + std::to_string(i) + ":\n";
  ConfigFile nested("dlock-deep-block", block);
  CHECK_THAT(config_error(nested.path), Catch::StartsWith(nested.path.string() + ":"));
}

TEST_CASE("a config file of aliases that would expand exponentially is refused quickly", "[hostile][config]") {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 12; ++i) {
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += std::string(j ? ", " : "") + "*a" + std::to_string(i - 1);
    text += "]\n";
  }
  ConfigFile bomb("dlock-alias-bomb", text);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THAT(config_error(bomb.path), Catch::StartsWith(bomb.path.string() + ":1: a0: unknown section"));
  CHECK(dlock::test::elapsed_ms(start) < 5000);
  ConfigFile alias_value("dlock-alias-value", "lock: &l\n  wait_ms: *l\n");
  CHECK_THAT(config_error(alias_value.path), Catch::StartsWith(alias_value.path.string() + ":"));
}

TEST_CASE("NUL bytes, invalid UTF-8 and control characters in a config file are ConfigErrors", "[hostile][config]") {
  ConfigFile nul("dlock-nul", std::string("redis:\n  host: a\0b\n", 20));
  CHECK_THAT(config_error(nul.path), Catch::StartsWith(nul.path.string() + ":"));
  ConfigFile utf("dlock-utf", "lock:\n  key_prefix: \"\xff\xfe\"\n  wait_ms: \xc0\x80\n");
  CHECK_THAT(config_error(utf.path), Catch::StartsWith(utf.path.string() + ":"));
  ConfigFile bell("dlock-bell", "logging:\n  level: \x07\x1b[2J\n");
  CHECK_THAT(config_error(bell.path), Catch::StartsWith(bell.path.string() + ":"));
}

TEST_CASE("a device that never ends is refused at the size limit", "[hostile][config]") {
  const auto start = std::chrono::steady_clock::now();
  CHECK_THAT(config_error("/dev/zero"), Catch::StartsWith("/dev/zero: the config is larger than 1 MiB"));
  CHECK(dlock::test::elapsed_ms(start) < 5000);
  // An empty device is an empty file: every default.
  CHECK(dlock::load_config("/dev/null").redis.port == 6379);
  // A FIFO nobody writes to must not block start-up.
  const std::string fifo = "/tmp/dlock-config-fifo-" + std::to_string(::getpid());
  ::unlink(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(config_error(fifo), Catch::Contains("pipe or socket, not a file"));
  ::unlink(fifo.c_str());
}

TEST_CASE("a config file that is a stray comma is a ConfigError, not an endless loop", "[hostile][config]") {
  // Found by fuzz/run.sh: yaml-cpp 0.7's LoadAll never returns on a document-level ','
  // (it yields empty documents forever, growing memory), so load_config parses at most two
  // documents. Run in a child with a deadline, so a regression fails this test instead of
  // hanging the suite. (No memory cap: the sanitizers need the address space.)
  ConfigFile comma("dlock-comma", ",");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    try {
      dlock::load_config(comma.path);
    } catch (const dlock::ConfigError&) {
      ::_exit(0);
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(3);
  }
  int status = -1;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      status = -1;
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  INFO("child status " << status << " (-1: still loading after 10 s)");
  CHECK(status != -1);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}
