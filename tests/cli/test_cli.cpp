// The `dlock` command, driven as an operator or a shell script drives it:
// the real binary, against a throwaway Redis.
#include <catch2/catch.hpp>

#include <signal.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <sstream>
#include <mutex>
#include <thread>

#include "cli_harness.hpp"
#include "dlock/version.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using namespace dlock::test;

namespace {

// 2024-05-01T12:00:01.234Z, the form `dlock status --json` writes times in.
std::string utc_timestamp(std::chrono::system_clock::time_point time) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm parts{};
  ::gmtime_r(&seconds, &parts);
  char text[96];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1,
                parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, static_cast<int>(ms % 1000));
  return text;
}

}  // namespace

TEST_CASE("dlock run: two processes on one key never overlap", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  const std::string log = dir.file("log");
  const std::string body = "echo start >> '" + log + "'; sleep 0.15; echo end >> '" + log + "'";
  constexpr int kRounds = 3;

  redis.run({"SET", "dlock:{cli:shared}:fence", "1000"});
  std::vector<int> statuses(2 * kRounds, -1);
  std::vector<std::thread> runners;
  for (int runner = 0; runner < 2; ++runner) {
    runners.emplace_back([&, runner] {
      for (int round = 0; round < kRounds; ++round) {
        int& status = statuses[static_cast<std::size_t>(runner * kRounds + round)];
        try {
          Dlock process(dir, {"run", "cli:shared", "--wait", "20s", "--config", config, "--", "sh", "-c", body});
          status = process.wait();
        } catch (const std::exception&) {
          status = -2;  // could not start it; checked on the main thread
        }
      }
    });
  }
  for (auto& runner : runners) runner.join();

  for (int status : statuses) CHECK(status == 0);
  std::istringstream lines(read_file(log));
  std::vector<std::string> seen;
  for (std::string line; std::getline(lines, line);) seen.push_back(line);
  INFO(read_file(log));
  REQUIRE(seen.size() == 4 * kRounds);
  for (std::size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == (i % 2 == 0 ? "start" : "end"));
  CHECK(redis.run({"EXISTS", "dlock:{cli:shared}"}) == "0");
  // Every run drew its own token from the counter seeded before them.
  CHECK(redis.run({"GET", "dlock:{cli:shared}:fence"}) == std::to_string(1000 + 2 * kRounds));
}

TEST_CASE("dlock run exits with the command's own status, 128+N when a signal killed it", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  CHECK(dlock_cli(dir, {"run", "cli:status", "--config", config, "--", "sh", "-c", "exit 7"}).status == 7);
  CHECK(dlock_cli(dir, {"run", "cli:status", "--config", config, "--", "true"}).status == 0);
  CHECK(dlock_cli(dir, {"run", "cli:status", "--config", config, "--", "sh", "-c", "kill -KILL $$"}).status ==
        128 + SIGKILL);
  const auto output = dlock_cli(dir, {"run", "cli:status", "--config", config, "--", "echo", "a  b", "--wait"});
  CHECK(output.out == "a  b --wait\n");  // arguments after -- reach the command untouched
  CHECK(redis.run({"EXISTS", "dlock:{cli:status}"}) == "0");
}

TEST_CASE("dlock run exits 75 when a busy lock is not had within the wait", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  auto holder = dlock::test::make_service(redis);
  auto guard = holder->lock("cli:busy");
  const auto started = std::chrono::steady_clock::now();
  const auto result = dlock_cli(dir, {"run", "cli:busy", "--wait", "300ms", "--config", config_file(dir, redis.port()),
                                      "--", "touch", dir.file("ran")});
  CHECK(result.status == 75);
  CHECK(dlock::test::elapsed_ms(started) >= 300);
  CHECK_THAT(result.err, Catch::Contains("cli:busy is still busy after waiting 300ms, held by pid " +
                                         std::to_string(::getpid())));
  CHECK_FALSE(fs::exists(dir.file("ran")));
  CHECK(guard);

  // --wait 0 tries once: words a person would write, not "within 0ms".
  const auto once =
      dlock_cli(dir, {"run", "cli:busy", "--wait", "0", "--config", config_file(dir, redis.port()), "--", "true"});
  CHECK(once.status == 75);
  CHECK_THAT(once.err, Catch::Contains("cli:busy is busy, held by pid") && Catch::Contains("tried once"));
  CHECK_THAT(once.err, !Catch::Contains("within 0"));
}

TEST_CASE("dlock run without --wait waits as long as the config's lock.wait_ms", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  auto holder = dlock::test::make_service(redis);
  auto guard = holder->lock("cli:config-wait");
  std::thread release([&] {
    std::this_thread::sleep_for(300ms);
    guard.unlock();
  });
  const auto result = dlock_cli(dir, {"run", "cli:config-wait", "--config",
                                      config_file(dir, redis.port(), "  wait_ms: 20000\n"), "--", "true"});
  release.join();
  INFO(result.err);
  CHECK(result.status == 0);
}

// Neither --wait nor lock.wait_ms in the file: the library's default wait (10 s), as flock(1) waits
// unless -n. A config that says 0 tries once, and the message says where that wait came from.
TEST_CASE("dlock run without --wait or lock.wait_ms waits the default wait and a config's 0 tries once", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  auto holder = dlock::test::make_service(redis);
  auto guard = holder->lock("cli:default-wait");
  std::thread release([&] {
    std::this_thread::sleep_for(500ms);
    guard.unlock();
  });
  const auto waited = dlock_cli(dir, {"run", "cli:default-wait", "--config", config_file(dir, redis.port()), "--",
                                      "touch", dir.file("ran")});
  release.join();
  INFO(waited.err);
  CHECK(waited.status == 0);
  CHECK(fs::exists(dir.file("ran")));

  auto again = holder->lock("cli:default-wait");
  const auto once = dlock_cli(dir, {"run", "cli:default-wait", "--config",
                                    config_file(dir, redis.port(), "  wait_ms: 0\n"), "--", "true"});
  CHECK(once.status == 75);
  CHECK_THAT(once.err, Catch::Contains("tried once, without waiting: pass --wait DUR"));
  const auto briefly = dlock_cli(dir, {"run", "cli:default-wait", "--config",
                                       config_file(dir, redis.port(), "  wait_ms: 200\n"), "--", "true"});
  CHECK(briefly.status == 75);
  CHECK_THAT(briefly.err, Catch::Contains("after waiting 200ms") &&
                              Catch::Contains("the wait is the config's lock.wait_ms: pass --wait DUR to change it"));
}

TEST_CASE("dlock run exits 69 when Redis is unreachable and 78 for a bad config", "[cli]") {
  TempDir dir;
  const auto unreachable = dlock_cli(dir, {"run", "cli:k", "--config", config_file(dir, dlock::test::free_loopback_port()),
                                           "--", "touch", dir.file("ran")});
  CHECK(unreachable.status == 69);
  CHECK_THAT(unreachable.err, Catch::Contains("redis unreachable"));

  const std::string bad = dir.write("bad.yaml", "redis:\n  port: 70000\n");
  const auto misconfigured = dlock_cli(dir, {"run", "cli:k", "--config", bad, "--", "touch", dir.file("ran")});
  CHECK(misconfigured.status == 78);
  CHECK_THAT(misconfigured.err, Catch::Contains("bad.yaml:2: redis.port"));
  CHECK(dlock_cli(dir, {"status", "cli:k", "--config", bad}).status == 78);
  CHECK(dlock_cli(dir, {"unlock", "--force", "cli:k", "--config", dir.file("missing.yaml")}).status == 78);
  CHECK_FALSE(fs::exists(dir.file("ran")));
}

TEST_CASE("dlock rejects bad options and arguments with usage on stderr and exit 64", "[cli]") {
  TempDir dir;
  const std::vector<std::vector<std::string>> bad_lines = {
      {},
      {"frobnicate"},
      {"run", "cli:k", "--bogus", "--", "true"},
      {"run", "cli:k", "--wait", "soon", "--", "true"},
      {"run", "cli:k", "--lease", "0s", "--", "true"},
      {"run", "cli:k", "--wait"},
      {"run", "cli:k"},
      {"run"},
      {"status"},
      {"status", "cli:k", "--json=yes"},
      {"unlock", "cli:k"},
      {"unlock", "--force"},
      {"unlock", "--force", "cli:k", "--read-write", "--semaphore"},
      {"unlock", "--force", "cli:k", "--owner", "a-token"},  // a lock is broken whole
      {"unlock", "--force", "cli:k", "--semaphore", "--owner="},
  };
  for (const auto& args : bad_lines) {
    const auto result = dlock_cli(dir, args);
    INFO("dlock " << joined(args));
    CHECK(result.status == 64);
    CHECK_THAT(result.err, Catch::Contains("usage: dlock"));
    CHECK(result.out.empty());
  }
}

TEST_CASE("dlock run exits 127 when the command is not found, and frees the lock", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  const auto result = dlock_cli(dir, {"run", "cli:missing", "--config", config_file(dir, redis.port()), "--",
                                      "dlock-no-such-command-here", "arg"});
  CHECK(result.status == 127);
  CHECK_THAT(result.err, Catch::Contains("dlock-no-such-command-here"));
  CHECK(redis.run({"EXISTS", "dlock:{cli:missing}"}) == "0");
}

TEST_CASE("dlock run passes a signal on to the command and releases the lock after it", "[cli]") {
  const int signal = GENERATE(SIGTERM, SIGINT, SIGHUP);
  const char* const name = signal == SIGTERM ? "TERM" : signal == SIGINT ? "INT" : "HUP";
  dlock::test::RedisServer redis;
  TempDir dir;
  Dlock process(dir, {"run", "cli:signal", "--config", config_file(dir, redis.port()), "--", trap_script(dir)});
  REQUIRE(dlock::test::eventually([&] { return fs::exists(dir.file("ready")); }));
  CHECK(redis.run({"EXISTS", "dlock:{cli:signal}"}) == "1");

  ::kill(process.pid(), signal);
  const int status = process.wait();
  INFO(process.err());
  CHECK(status == 0);  // the command trapped the signal and exited 0; dlock passes that on
  CHECK(read_file(dir.file("marker")) == std::string(name) + "\n");
  CHECK(redis.run({"EXISTS", "dlock:{cli:signal}"}) == "0");
}

TEST_CASE("dlock run --kill-on-lost stops the command when the lock is lost behind it", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port(), "  watchdog_timeout_ms: 600\n");
  Dlock process(dir, {"run", "cli:lost", "--kill-on-lost", "--config", config, "--", trap_script(dir)});
  REQUIRE(dlock::test::eventually([&] { return fs::exists(dir.file("ready")); }));

  REQUIRE(redis.run({"DEL", "dlock:{cli:lost}"}) == "1");
  const auto deleted = std::chrono::steady_clock::now();
  const int status = process.wait();
  INFO(process.err());
  CHECK(dlock::test::elapsed_ms(deleted) < 3000);  // found at the next renewal, every 200 ms
  CHECK(status != 0);
  CHECK(read_file(dir.file("marker")) == "TERM\n");
  // One lost lock, one line: the library's, worded as the command's own.
  CHECK(lines_containing(process.err(), "lost") == 1);
  CHECK_THAT(process.err(), Catch::Contains("dlock: error: lock 'cli:lost' lost by owner"));
}

TEST_CASE("dlock run: a lock lost while COMMAND runs is one line on stderr and exit 1", "[cli]") {
  // Found by the watchdog (a 600 ms lease: renewed every 200 ms, while COMMAND runs 500 ms more),
  // or only by the release at the end (a 60 s lease: no renewal before COMMAND ends).
  const auto [lease, tail] = GENERATE(std::make_pair("600", "; sleep 0.5"), std::make_pair("60000", ""));
  dlock::test::RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port(), std::string("  watchdog_timeout_ms: ") + lease + "\n");
  // COMMAND waits until the test deleted the lock behind it.
  const std::string body =
      "touch '" + dir.file("ready") + "'; while [ -e '" + dir.file("ready") + "' ]; do sleep 0.05; done" + tail;
  Dlock process(dir, {"run", "cli:lost-once", "--config", config, "--", "sh", "-c", body});
  REQUIRE(dlock::test::eventually([&] { return fs::exists(dir.file("ready")); }));
  REQUIRE(redis.run({"DEL", "dlock:{cli:lost-once}"}) == "1");
  fs::remove(dir.file("ready"));
  const int status = process.wait();
  INFO("lease " << lease << ": " << process.err());
  CHECK(status == 1);  // COMMAND exited 0, but without the lock for part of its run
  CHECK(lines_containing(process.err(), "lost") == 1);
  CHECK(lines_containing(process.err(), "cli:lost-once") == 1);
}

TEST_CASE("dlock status --json shows the holder, hold count, lease and fencing token", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  auto service = dlock::test::make_service(redis);
  auto first = service->lock("cli:held");
  auto reentered = service->lock("cli:held");
  auto previous = service->lock("cli:free");
  previous.unlock();
  const std::string weird = "we\"ird\\key\n\x01\xff";
  auto weird_guard = service->lock(weird);
  const std::string owner = redis.run({"HKEYS", "dlock:{cli:held}"});

  const auto result = dlock_cli(dir, {"status", "cli:held", "cli:free", "cli:never", weird, "--config", config, "--json"});
  INFO(result.out << result.err);
  REQUIRE(result.status == 0);
  std::istringstream lines(result.out);
  std::vector<std::string> objects;
  for (std::string line; std::getline(lines, line);) objects.push_back(line);
  REQUIRE(objects.size() == 4);
  CHECK(objects.front().front() == '[');
  CHECK(objects.back().back() == ']');

  CHECK(json_field(objects[0], "key") == "\"cli:held\"");
  CHECK(json_field(objects[0], "held") == "true");
  CHECK(json_field(objects[0], "owner") == "\"" + owner + "\"");
  CHECK(json_field(objects[0], "hold_count") == "2");
  CHECK(json_field(objects[0], "fencing_token") == std::to_string(first.fencing_token()));
  const long long lease_ms = std::stoll(json_field(objects[0], "lease_ms"));
  CHECK(lease_ms > 0);
  CHECK(lease_ms <= 30000);

  CHECK(json_field(objects[1], "held") == "false");
  CHECK(json_field(objects[1], "owner") == "null");
  CHECK(json_field(objects[1], "lease_ms") == "null");
  CHECK(json_field(objects[1], "fencing_token") == std::to_string(previous.fencing_token()));
  CHECK(json_field(objects[2], "fencing_token") == "null");

  // Quotes, backslashes, control bytes and bytes that are not UTF-8 come out escaped.
  CHECK(json_field(objects[3], "key") == R"("we\"ird\\key\n\u0001\u00ff")");
  CHECK(json_field(objects[3], "held") == "true");

  const auto text = dlock_cli(dir, {"status", "cli:held", "cli:never", "--config", config});
  CHECK(text.status == 0);
  CHECK_THAT(text.out, Catch::StartsWith("cli:held: held by pid " + std::to_string(::getpid()) + " on "));
  CHECK_THAT(text.out, Catch::Contains(", owner " + owner + " (hold count 2)"));
  // A free lock says where it was looked for: another prefix or server is the usual surprise.
  CHECK_THAT(text.out, Catch::Contains("cli:never: free (no lock dlock:{cli:never} on redis 127.0.0.1:" +
                                       std::to_string(redis.port()) + ")"));
}

TEST_CASE("dlock status names the holder's host, pid and since when, for a lock any service took", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  auto service = dlock::test::make_service(redis);
  const auto before = std::chrono::system_clock::now();
  auto guard = service->lock("cli:who");
  const auto after = std::chrono::system_clock::now();
  const auto result = dlock_cli(dir, {"status", "cli:who", "--config", config_file(dir, redis.port()), "--json"});
  INFO(result.out << result.err);
  REQUIRE(result.status == 0);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  CHECK(json_field(result.out, "host") == "\"" + std::string(host) + "\"");
  CHECK(json_field(result.out, "pid") == std::to_string(::getpid()));
  // "since" is when the lock() call began, to the millisecond.
  const std::string since = json_field(result.out, "since");
  REQUIRE(since.size() == 26);
  CHECK(since >= "\"" + utc_timestamp(before - 1ms));
  CHECK(since <= "\"" + utc_timestamp(after + 1ms));
  CHECK(json_field(result.out, "lock_name") == "\"dlock:{cli:who}\"");
}

TEST_CASE("dlock list shows every held lock under the prefix with holder, holds, lease, waiters and token", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  auto service = dlock::test::make_service(redis);
  auto a = service->lock("cli:list:a");
  auto a_again = service->lock("cli:list:a");
  auto b = service->lock("cli:list:b", {.lease = 20s});
  auto other = service->lock("elsewhere");
  service->lock("cli:list:released").unlock();
  auto waiter_service = dlock::test::make_service(redis);
  std::thread waiter([&] { waiter_service->try_lock("cli:list:a", {.wait = 3s}); });
  REQUIRE(dlock::test::await_line(redis, "cli:list:a", 1, 0ms));

  const auto json = dlock_cli(dir, {"list", "cli:list:*", "--config", config, "--json"});
  INFO(json.out << json.err);
  REQUIRE(json.status == 0);
  std::istringstream lines(json.out);
  std::vector<std::string> objects;
  for (std::string line; std::getline(lines, line);) objects.push_back(line);
  REQUIRE(objects.size() == 2);  // the released lock and the one outside the pattern are not listed
  CHECK(json_field(objects[0], "key") == "\"cli:list:a\"");
  CHECK(json_field(objects[0], "hold_count") == "2");
  CHECK(json_field(objects[0], "waiters") == "1");
  CHECK(json_field(objects[0], "pid") == std::to_string(::getpid()));
  CHECK(json_field(objects[0], "fencing_token") == std::to_string(a.fencing_token()));
  CHECK(json_field(objects[1], "key") == "\"cli:list:b\"");
  CHECK(json_field(objects[1], "waiters") == "0");
  const long long lease_ms = std::stoll(json_field(objects[1], "lease_ms"));
  CHECK(lease_ms > 0);
  CHECK(lease_ms <= 20000);

  const auto table = dlock_cli(dir, {"list", "--config", config});
  INFO(table.out);
  CHECK(table.status == 0);
  CHECK_THAT(table.out, Catch::StartsWith("KEY "));
  CHECK_THAT(table.out, Catch::Contains("cli:list:a") && Catch::Contains("cli:list:b") && Catch::Contains("elsewhere"));
  CHECK_THAT(table.out, Catch::Contains("3 locks held under prefix 'dlock:' on redis 127.0.0.1:"));
  a_again.unlock();
  a.unlock();
  waiter.join();
}

TEST_CASE("dlock reads dlock's section of a service's own config file with --section", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.key_prefix = "inv-lock:"; });
  auto guard = service->lock("stock:1");
  const std::string file = dir.write("service.yaml", "inventory:\n  warehouses: [north]\ndlock:\n  redis:\n    port: " +
                                                        std::to_string(redis.port()) +
                                                        "\n  lock:\n    key_prefix: \"inv-lock:\"\n");
  const auto status = dlock_cli(dir, {"status", "stock:1", "--config", file, "--section", "dlock", "--json"});
  INFO(status.out << status.err);
  CHECK(status.status == 0);
  CHECK(json_field(status.out, "held") == "true");
  // Without it, the whole file is read, and the message says what to do.
  const auto whole = dlock_cli(dir, {"status", "stock:1", "--config", file});
  CHECK(whole.status == 78);
  CHECK_THAT(whole.err, Catch::Contains("inventory: unknown section") && Catch::Contains("pass --section"));
  CHECK(dlock_cli(dir, {"status", "stock:1", "--section", "dlock"}).status == 64);  // a section of no file
}

TEST_CASE("dlock list with nothing held says which prefix and server it searched", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.key_prefix = "inv-lock:"; });
  auto guard = service->lock("stock:1");
  // The default prefix finds nothing, and says where it looked.
  const auto result = dlock_cli(dir, {"list", "--config", config_file(dir, redis.port())});
  CHECK(result.status == 0);
  CHECK_THAT(result.out, Catch::StartsWith("no locks held under prefix 'dlock:' on redis 127.0.0.1:" +
                                           std::to_string(redis.port())));
  CHECK_THAT(result.out, Catch::Contains("lock.key_prefix"));
  const auto json = dlock_cli(dir, {"list", "--json", "--config", config_file(dir, redis.port())});
  CHECK(json.out == "[]\n");
  CHECK_THAT(json.err, Catch::Contains("no locks held under prefix 'dlock:'"));
  // With the service's prefix, it is there; a prefix holding glob characters is matched literally.
  const auto found = dlock_cli(dir, {"list", "--config", config_file(dir, redis.port(), "  key_prefix: \"inv-lock:\"\n")});
  CHECK_THAT(found.out, Catch::Contains("stock:1") && Catch::Contains("1 lock held under prefix 'inv-lock:'"));
  auto starred = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.key_prefix = "a*"; });
  auto starred_guard = starred->lock("k");
  const auto literal = dlock_cli(dir, {"list", "--config", config_file(dir, redis.port(), "  key_prefix: \"a*\"\n")});
  CHECK_THAT(literal.out, Catch::Contains("1 lock held under prefix 'a*'"));
}

TEST_CASE("dlock unlock --force frees a lock another service holds, and the holder sees it lost", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  auto holder = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = dlock::Millis(600); });
  std::atomic<bool> hook_called{false};
  holder->on_lost([&](const std::string& key) { hook_called = key == "cli:stuck"; });
  auto guard = holder->lock("cli:stuck");
  const std::string owner = redis.run({"HKEYS", "dlock:{cli:stuck}"});

  const auto result = dlock_cli(dir, {"unlock", "--force", "cli:stuck", "--config", config});
  INFO(result.out << result.err);
  CHECK(result.status == 0);
  CHECK_THAT(result.out, Catch::Contains(owner));
  CHECK_THAT(result.err, Catch::Contains("warn") && Catch::Contains("forced unlock") && Catch::Contains(owner));
  CHECK(redis.run({"EXISTS", "dlock:{cli:stuck}"}) == "0");

  CHECK(dlock::test::eventually([&] { return guard.lost(); }, 3s));
  // The hook runs on the watchdog's thread just after the guard reads lost.
  CHECK(dlock::test::eventually([&] { return hook_called.load(); }, 3s));
  CHECK_THROWS_AS(guard.check(), dlock::LockLostError);

  const auto again = dlock_cli(dir, {"unlock", "--force", "cli:stuck", "--config", config});
  CHECK(again.status == 1);
  CHECK_THAT(again.err, Catch::Contains("not held"));
}

TEST_CASE("dlock unlock --force hands the lock to the oldest waiter and wakes it at once", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  // Waiters that would re-check only every 10 s by themselves: only the notice can wake them sooner.
  const auto slow_polling = [](dlock::Config& c) { c.lock.turn_window = 30s; };
  auto holder = dlock::test::make_service(redis);
  auto first = dlock::test::make_service(redis, slow_polling);
  auto second = dlock::test::make_service(redis, slow_polling);
  auto guard = holder->lock("cli:wake", {.lease = 30s});  // would expire only in 30 s
  std::mutex mutex;
  std::vector<std::string> order;
  auto wait_for = [&](std::shared_ptr<dlock::RedisLockService> service, std::string name) {
    return std::thread([&, service, name] {
      auto got = service->lock("cli:wake", {.wait = 20s});
      std::lock_guard lock(mutex);
      order.push_back(name);
    });
  };
  std::thread a = wait_for(first, "first");
  REQUIRE(dlock::test::await_line(redis, "cli:wake", 1, 0ms));
  std::thread b = wait_for(second, "second");
  REQUIRE(dlock::test::await_line(redis, "cli:wake", 2));
  const auto started = std::chrono::steady_clock::now();
  CHECK(dlock_cli(dir, {"unlock", "--force", "cli:wake", "--config", config_file(dir, redis.port())}).status == 0);
  a.join();
  CHECK(dlock::test::elapsed_ms(started) < 5000);  // woken by the notice, not by its 10 s re-check
  b.join();
  CHECK(order == std::vector<std::string>{"first", "second"});
}

TEST_CASE("dlock --version prints the library version and --help describes every command and option", "[cli]") {
  TempDir dir;
  const auto version = dlock_cli(dir, {"--version"});
  CHECK(version.status == 0);
  CHECK(version.out == "dlock " + std::string(dlock::version()) + "\n");
  CHECK(std::string(dlock::version()) == "0.1.0");

  const auto help = dlock_cli(dir, {"--help"});
  CHECK(help.status == 0);
  for (const char* text : {"run", "status", "list", "unlock", "--version", "76"}) {
    CHECK_THAT(help.out, Catch::Contains(text));
  }
  const std::vector<std::pair<std::string, std::vector<std::string>>> options = {
      {"run", {"--wait", "--lease", "--config", "--kill-on-lost", "75", "69", "76", "78", "64", "127"}},
      {"status", {"--config", "--section", "--json", "76"}},
      {"list", {"PATTERN", "--config", "--section", "--json", "SCAN", "76"}},
      {"unlock", {"--force", "--read-write", "--semaphore", "--owner", "--config", "76"}},
  };
  for (const auto& [command, names] : options) {
    const auto usage = dlock_cli(dir, {command, "--help"});
    CHECK(usage.status == 0);
    for (const auto& name : names) CHECK_THAT(usage.out, Catch::Contains(name));
  }
}
