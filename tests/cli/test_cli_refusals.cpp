// When Redis refuses the dlock command (a name of another type, a missing
// ACL right, a read-only replica): exit 76, a message saying which refusal it
// was, and never a "free" for a lock that could not be read. A refused login
// is said as such (exit 69), never as an unreachable Redis.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "cli_harness.hpp"
#include "fault_tools.hpp"
#include "readme_acl.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using namespace dlock::test;

namespace {

void set_user(const RedisServer& redis, const std::string& name, const std::vector<std::string>& rights) {
  std::vector<std::string> argv = {"ACL", "SETUSER", name, "reset", "on", ">secret"};
  argv.insert(argv.end(), rights.begin(), rights.end());
  REQUIRE(redis.run(argv) == "OK");
}

// The lock cli:acl held by a service, and dlock run as Redis user `name` with `rights`.
struct LockHeldElsewhere {
  LockHeldElsewhere(const std::string& name, const std::vector<std::string>& rights) {
    set_user(redis, name, rights);
    config = config_file(dir, redis.port(), "", "  username: " + name + "\n  password: secret\n");
  }
  Result dlock(std::vector<std::string> args) const {
    args.insert(args.end(), {"--config", config});
    return dlock_cli(dir, args);
  }

  RedisServer redis;
  TempDir dir;
  std::shared_ptr<dlock::RedisLockService> holder = make_service(redis);
  dlock::LockGuard guard = holder->lock("cli:acl");
  std::string config;
};

// LockHeldElsewhere with dlock run as a user who has docs/operations.md's rights but `missing`.
std::unique_ptr<LockHeldElsewhere> held_without(const std::string& missing) {
  auto rights = readme_minimal_acl();
  std::erase(rights, missing);
  return std::make_unique<LockHeldElsewhere>("without" + missing.substr(1), rights);
}

}  // namespace

TEST_CASE("a lock name holding another type makes run, status and unlock exit 76, and status never says free",
          "[cli]") {
  RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  REQUIRE(redis.run({"SET", "dlock:{cli:typed}", "someone else's string"}) == "OK");

  const auto run = dlock_cli(dir, {"run", "cli:typed", "--config", config, "--", "touch", dir.file("ran")});
  CHECK(run.status == 76);
  CHECK_THAT(run.err, Catch::Contains("not a dlock lock"));
  CHECK_FALSE(fs::exists(dir.file("ran")));

  const auto status = dlock_cli(dir, {"status", "cli:typed", "--config", config});
  CHECK(status.status == 76);
  CHECK_THAT(status.out, Catch::Contains("cli:typed: unknown") && Catch::Contains("WRONGTYPE"));
  CHECK_THAT(status.out, !Catch::Contains("free"));
  const auto json = dlock_cli(dir, {"status", "cli:typed", "--config", config, "--json"});
  CHECK(json.status == 76);
  CHECK(json_field(json.out, "held") == "null");

  const auto unlock = dlock_cli(dir, {"unlock", "--force", "cli:typed", "--config", config});
  CHECK(unlock.status == 76);
  CHECK_THAT(unlock.err, Catch::Contains("WRONGTYPE"));
  CHECK(redis.run({"GET", "dlock:{cli:typed}"}) == "someone else's string");
}

TEST_CASE("a Redis that says 'not now' (BUSY) makes status, list and unlock exit 69, and status never says free",
          "[cli][transient]") {
  RedisServer redis({"--busy-reply-threshold", "100"});
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  auto holder = make_service(redis);
  auto guard = holder->lock("cli:busy");
  std::thread script = run_long_script(redis, 3);

  const auto status = dlock_cli(dir, {"status", "cli:busy", "--config", config});
  const auto list = dlock_cli(dir, {"list", "--config", config});
  const auto unlock = dlock_cli(dir, {"unlock", "--force", "cli:busy", "--config", config});
  script.join();
  INFO(status.out << status.err);
  CHECK(status.status == 69);
  CHECK_THAT(status.out + status.err, Catch::Contains("BUSY") && Catch::Contains("try again"));
  CHECK_THAT(status.out, !Catch::Contains("free"));
  INFO(list.err);
  CHECK(list.status == 69);
  CHECK_THAT(list.err, Catch::Contains("BUSY") && Catch::Contains("try again"));
  INFO(unlock.err);
  CHECK(unlock.status == 69);
  CHECK_THAT(unlock.err, Catch::Contains("BUSY"));

  // Once the script ended, the same reads answer, and the forced unlock changed nothing.
  const auto after = dlock_cli(dir, {"status", "cli:busy", "--config", config});
  CHECK(after.status == 0);
  CHECK_THAT(after.out, Catch::Contains("held by"));
  CHECK(static_cast<bool>(guard));
}

TEST_CASE("a read-only replica is reported as such, with exit 76", "[cli]") {
  RedisServer master;
  RedisServer replica({"--replicaof", "127.0.0.1", std::to_string(master.port())});
  REQUIRE(eventually([&] {
    return replica.run({"INFO", "replication"}).find("master_link_status:up") != std::string::npos;
  }));
  auto holder = make_service(master);
  auto guard = holder->lock("cli:ro");
  REQUIRE(eventually([&] { return replica.run({"EXISTS", "dlock:{cli:ro}"}) == "1"; }));
  TempDir dir;
  const std::string config = config_file(dir, replica.port());

  const auto run = dlock_cli(dir, {"run", "cli:other", "--config", config, "--", "touch", dir.file("ran")});
  INFO(run.err);
  CHECK(run.status == 76);
  CHECK_THAT(run.err, Catch::Contains("READONLY") && Catch::Contains("read-only replica"));
  CHECK_THAT(run.err, !Catch::Contains("not a dlock lock"));
  CHECK_FALSE(fs::exists(dir.file("ran")));

  const auto unlock = dlock_cli(dir, {"unlock", "--force", "cli:ro", "--config", config});
  INFO(unlock.err);
  CHECK(unlock.status == 76);
  CHECK_THAT(unlock.err, Catch::Contains("READONLY") && Catch::Contains("read-only replica"));
  CHECK(master.run({"EXISTS", "dlock:{cli:ro}"}) == "1");

  // Reading works on a replica: status answers from it.
  const auto status = dlock_cli(dir, {"status", "cli:ro", "--config", config, "--json"});
  CHECK(status.status == 0);
  CHECK(json_field(status.out, "held") == "true");
}

TEST_CASE("the ACL of docs/operations.md serves dlock status, list and unlock --force", "[cli][acl]") {
  LockHeldElsewhere held("dlock", readme_minimal_acl());

  const auto status = held.dlock({"status", "cli:acl", "--json"});
  INFO(status.out << status.err);
  CHECK(status.status == 0);
  CHECK(json_field(status.out, "held") == "true");
  CHECK(json_field(status.out, "hold_count") == "1");
  CHECK(json_field(status.out, "pid") == std::to_string(::getpid()));  // the registry entry is readable

  const auto list = held.dlock({"list", "--json"});
  INFO(list.out << list.err);
  CHECK(list.status == 0);
  CHECK(json_field(list.out, "key") == "\"cli:acl\"");
  CHECK(json_field(list.out, "waiters") == "0");

  const auto unlock = held.dlock({"unlock", "--force", "cli:acl"});
  INFO(unlock.out << unlock.err);
  CHECK(unlock.status == 0);
  CHECK(held.redis.run({"EXISTS", "dlock:{cli:acl}"}) == "0");

  // The read-write lock and semaphore of the same name: listed, and broken.
  auto reader = held.holder->read_lock("cli:acl", {.lease = 60s});
  auto permit = held.holder->semaphore("cli:acl", 2).acquire(1, {.lease = 60s});
  const auto shared = held.dlock({"list", "--json"});
  INFO(shared.out << shared.err);
  CHECK(shared.status == 0);
  CHECK(lines_containing(shared.out, "\"kind\":\"read\"") == 1);
  CHECK(lines_containing(shared.out, "\"kind\":\"semaphore\"") == 1);
  CHECK(held.dlock({"unlock", "--force", "--read-write", "cli:acl"}).status == 0);
  CHECK(held.dlock({"unlock", "--force", "--semaphore", "cli:acl"}).status == 0);
  CHECK(held.redis.run({"KEYS", "dlock:{cli:acl}:*:*:*"}).empty());  // no holder's record left
}

TEST_CASE("a user who may not read a lock gets exit 76 from status, never a free lock", "[cli][acl]") {
  const auto held = held_without("+hgetall");
  const auto status = held->dlock({"status", "cli:acl", "--json"});
  INFO(status.out << status.err);
  CHECK(status.status == 76);
  CHECK(json_field(status.out, "held") == "null");
  CHECK_THAT(status.out, Catch::Contains("lacks a right") && Catch::Contains("+hgetall"));
}

TEST_CASE("a user who may not read a key's holders gets the error in both shared parts of status --json",
          "[cli][acl]") {
  const auto held = held_without("+smembers");
  const auto status = held->dlock({"status", "cli:acl", "--json"});
  INFO(status.out << status.err);
  CHECK(status.status == 76);
  CHECK(json_field(status.out, "held") == "true");  // the lock itself could be read
  CHECK_THAT(status.out, Catch::Contains("\"read_write\":{\"error\":\"redis ") &&
                             Catch::Contains("\"semaphore\":{\"error\":\"redis "));
  CHECK_THAT(status.out, Catch::Contains("smembers") && Catch::Contains("lacks a right"));
  const auto text = held->dlock({"status", "cli:acl"});
  CHECK(text.status == 76);
  CHECK_THAT(text.out, Catch::Contains("cli:acl (read-write): unknown;") &&
                           Catch::Contains("cli:acl (semaphore): unknown;"));
}

TEST_CASE("a name of another type in a key's read-write lock makes only that part unknown in status", "[cli]") {
  RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  REQUIRE(redis.run({"SET", "dlock:{cli:part}:rw:write", "someone else's string"}) == "OK");
  auto service = make_service(redis);
  auto permit = service->semaphore("cli:part", 2).acquire();

  const auto status = dlock_cli(dir, {"status", "cli:part", "--config", config, "--json"});
  INFO(status.out << status.err);
  CHECK(status.status == 76);
  CHECK(json_field(status.out, "held") == "false");
  CHECK_THAT(status.out, Catch::Contains("\"read_write\":{\"error\":") && Catch::Contains("WRONGTYPE"));
  CHECK_THAT(status.out, Catch::Contains("\"semaphore\":{\"permits\":2,\"in_use\":1,"));
}

TEST_CASE("a user who may not SCAN gets exit 76 from list, naming the right", "[cli][acl]") {
  const auto held = held_without("+scan");
  const auto list = held->dlock({"list"});
  INFO(list.out << list.err);
  CHECK(list.status == 76);
  CHECK_THAT(list.err, Catch::Contains("SCAN") && Catch::Contains("lacks a right"));
}

TEST_CASE("DLOCK_REDIS_PORT=+6379 is refused without a config file as with one", "[cli]") {
  TempDir dir;
  const auto result = dlock_cli(dir, {"status", "cli:k"}, {.env = {"DLOCK_REDIS_PORT=+6379"}});
  CHECK(result.status == 78);
  CHECK_THAT(result.err, Catch::Contains("DLOCK_REDIS_PORT") && Catch::Contains("no sign"));
}

TEST_CASE("a wrong password makes dlock say authentication failed naming the server and the setting", "[cli][auth]") {
  RedisServer redis({"--requirepass", "right"});
  TempDir dir;
  const std::string server = "127.0.0.1:" + std::to_string(redis.port());
  const std::string wrong = config_file(dir, redis.port(), "", "  password: wrong\n");
  const std::string none = config_file(dir, redis.port());
  for (const auto& args : std::vector<std::vector<std::string>>{{"run", "cli:auth", "--config", wrong, "--", "true"},
                                                                 {"status", "cli:auth", "--config", wrong},
                                                                 {"status", "cli:auth", "--config", none}}) {
    const auto result = dlock_cli(dir, args);
    INFO(joined(args) << "\n" << result.err);
    CHECK(result.status == 69);
    CHECK_THAT(result.err, Catch::Contains(server + ": authentication failed") && Catch::Contains("redis.password"));
    CHECK_THAT(result.err, !Catch::Contains("unreachable"));
  }
}

TEST_CASE("a wrong password for an ACL user makes dlock name redis.username too", "[cli][auth]") {
  RedisServer redis({"--user", "alice", "on", ">pw", "~*", "&*", "+@all"});
  TempDir dir;
  const auto result =
      dlock_cli(dir, {"status", "cli:auth", "--config",
                      config_file(dir, redis.port(), "", "  username: alice\n  password: not-pw\n")});
  INFO(result.err);
  CHECK(result.status == 69);
  CHECK_THAT(result.err, Catch::Contains("authentication failed") && Catch::Contains("redis.username"));
  CHECK_THAT(result.err, !Catch::Contains("unreachable"));
}
