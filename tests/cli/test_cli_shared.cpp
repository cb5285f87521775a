// The `dlock` command with read-write locks and semaphores: `run --read`,
// `run --write`, `run --permits NAME:N`, `status` and `list` showing readers,
// writers and permits, and `unlock --force` breaking them.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <sstream>
#include <thread>
#include <vector>

#include "cli_harness.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using namespace dlock::test;

namespace {

// A throwaway Redis, a service on it, and the config file dlock is run with.
struct CliRedis {
  RedisServer redis;
  TempDir dir;
  std::string config = config_file(dir, redis.port());
  std::shared_ptr<dlock::RedisLockService> service = make_service(redis);

  Result dlock(const std::vector<std::string>& args) const { return dlock_cli_with(dir, config, args); }
};

}  // namespace

TEST_CASE("dlock run --permits NAME:N runs at most N commands at once", "[cli][semaphore]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  const std::string log = dir.file("log");
  // Each command counts itself in and out under flock(1), so the highest count seen is exact.
  const std::string body = "flock '" + log + ".lock' sh -c 'n=$(($(cat " + log + ".n 2>/dev/null || echo 0)+1)); "
                           "echo $n > " + log + ".n; echo $n >> " + log + "'; sleep 0.2; flock '" + log +
                           ".lock' sh -c 'echo $(($(cat " + log + ".n)-1)) > " + log + ".n'";
  std::vector<int> statuses(6, -1);
  std::vector<std::thread> runners;
  for (int i = 0; i < 6; ++i) {
    runners.emplace_back([&, i] {
      try {
        Dlock process(dir, {"run", "--permits", "cli:pool:2", "--wait", "20s", "--config", config, "--", "sh", "-c",
                            body});
        statuses[static_cast<std::size_t>(i)] = process.wait();
      } catch (const std::exception&) {
        statuses[static_cast<std::size_t>(i)] = -2;
      }
    });
  }
  for (auto& runner : runners) runner.join();
  for (int status : statuses) CHECK(status == 0);
  std::istringstream lines(read_file(log));
  int highest = 0, entries = 0;
  for (std::string line; std::getline(lines, line); ++entries) highest = std::max(highest, std::stoi(line));
  CHECK(entries == 6);
  CHECK(highest <= 2);
  CHECK(redis.run({"GET", "dlock:{cli:pool}:semaphore"}) == "2");
  CHECK(redis.run({"EXISTS", "dlock:{cli:pool}:semaphore:holders"}) == "0");
}

TEST_CASE("dlock run --read runs beside readers and --write waits for them", "[cli][rwlock]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  auto service = dlock::test::make_service(redis);
  auto reading = service->read_lock("cli:doc");
  const auto read = dlock_cli(dir, {"run", "cli:doc", "--read", "--config", config, "--", "touch", dir.file("read")});
  CHECK(read.status == 0);
  CHECK(fs::exists(dir.file("read")));
  const auto write = dlock_cli(dir, {"run", "cli:doc", "--write", "--wait", "200ms", "--config", config, "--", "touch",
                                     dir.file("write")});
  CHECK(write.status == 75);
  CHECK_FALSE(fs::exists(dir.file("write")));
  reading.unlock();
  const auto later = dlock_cli(dir, {"run", "cli:doc", "--write", "--config", config, "--", "touch", dir.file("write")});
  CHECK(later.status == 0);
  CHECK(fs::exists(dir.file("write")));
}

TEST_CASE("dlock status shows a key's writer, readers and semaphore permits", "[cli][rwlock][semaphore]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  auto service = dlock::test::make_service(redis);
  auto permits = service->semaphore("cli:mixed", 5).acquire(3);
  auto reader = service->read_lock("cli:mixed");
  const auto text = dlock_cli(dir, {"status", "cli:mixed", "--config", config});
  CHECK(text.status == 0);
  CHECK_THAT(text.out, Catch::Contains("cli:mixed (read-write): read-locked by 1 reader(s): pid " +
                                       std::to_string(::getpid())));
  CHECK_THAT(text.out, Catch::Contains("cli:mixed (semaphore): 3 of 5 permits held: 3 by pid " +
                                       std::to_string(::getpid())));
  const auto json = dlock_cli(dir, {"status", "cli:mixed", "--config", config, "--json"});
  CHECK(json.status == 0);
  CHECK_THAT(json.out, Catch::Contains("\"semaphore\":{\"permits\":5,\"in_use\":3,\"holders\":[{\"token\":"));
  CHECK_THAT(json.out, Catch::Contains("\"read_write\":{\"writer\":null,\"readers\":[{\"token\":"));
  reader.unlock();
  permits.unlock();
  const auto after = dlock_cli(dir, {"status", "cli:mixed", "--config", config, "--json"});
  CHECK_THAT(after.out, Catch::Contains("\"read_write\":null"));
  CHECK_THAT(after.out, Catch::Contains("\"semaphore\":{\"permits\":5,\"in_use\":0,\"holders\":[]}"));
}

TEST_CASE("dlock run refuses bad --permits, --read with --write, and a key with --permits", "[cli]") {
  dlock::test::RedisServer redis;
  TempDir dir;
  const std::string config = config_file(dir, redis.port());
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"run", "--permits", "pool", "--config", config, "--", "true"},
           {"run", "--permits", "pool:0", "--config", config, "--", "true"},
           {"run", "--permits", ":3", "--config", config, "--", "true"},
           {"run", "k", "--read", "--write", "--config", config, "--", "true"},
           {"run", "--permits", "pool:2", "--read", "--config", config, "--", "true"}}) {
    const auto result = dlock_cli(dir, args);
    INFO(args[2] << " " << result.err);
    CHECK(result.status == 64);
    CHECK_THAT(result.err, Catch::Contains("usage: dlock run"));
  }
  CHECK(redis.run({"KEYS", "dlock:{*"}).empty());
}

TEST_CASE("dlock list shows read-write locks and semaphores with their holders", "[cli][rwlock][semaphore]") {
  CliRedis cli;
  auto& service = cli.service;
  auto other = make_service(cli.redis);
  auto lock = service->lock("cli:plain");
  auto writer = service->write_lock("cli:doc");
  auto reader = service->read_lock("cli:book");
  auto second_reader = other->read_lock("cli:book");
  auto permits = service->semaphore("cli:pool", 5).acquire(2);
  service->semaphore("cli:idle", 3).acquire(1).unlock();  // a count, nobody holding: not listed
  auto braced = service->lock("cli:doc}:rw:write");        // its name ends like cli:doc's writer's

  const auto json = cli.dlock({"list", "--json"});
  INFO(json.out << json.err);
  CHECK(json.status == 0);
  CHECK(lines_containing(json.out, "\"kind\":") == 6);
  CHECK(lines_containing(json.out, "\"key\":\"cli:plain\",\"kind\":\"lock\"") == 1);
  CHECK(lines_containing(json.out, "\"key\":\"cli:doc}:rw:write\",\"kind\":\"lock\"") == 1);
  CHECK(lines_containing(json.out, "\"key\":\"cli:doc\",\"kind\":\"write\"") == 1);
  CHECK(lines_containing(json.out, "\"key\":\"cli:book\",\"kind\":\"read\"") == 2);
  CHECK(lines_containing(json.out, "\"key\":\"cli:pool\",\"kind\":\"semaphore\"") == 1);
  CHECK(lines_containing(json.out, "\"hold_count\":2,\"host\":") == 1);  // the permits that holder has
  CHECK(lines_containing(json.out, "\"permits\":5") == 1);
  CHECK(lines_containing(json.out, "\"pid\":" + std::to_string(::getpid())) == 6);
  CHECK(lines_containing(json.out, "cli:idle") == 0);
  // PATTERN is matched against the key itself.
  const auto doc = cli.dlock({"list", "cli:doc", "--json"});
  CHECK(lines_containing(doc.out, "\"kind\":") == 1);
  CHECK(lines_containing(doc.out, "\"kind\":\"write\"") == 1);

  const auto table = cli.dlock({"list", "cli:*"});
  INFO(table.out);
  CHECK(table.status == 0);
  CHECK(lines_containing(table.out, "cli:book") == 2);
  CHECK_THAT(table.out, Catch::Contains("2 locks, 2 read-write locks and 1 semaphore held under prefix 'dlock:'"));
}

TEST_CASE("dlock unlock --force --read-write breaks a read-write lock and wakes the writer waiting for it",
          "[cli][rwlock]") {
  CliRedis cli;
  // Readers whose records would stay 60 s, and a writer that would look again only every 20 s by itself:
  // within its 10 s wait, only the notice of the forced unlock can let it in.
  auto first = cli.service->read_lock("cli:rw", {.lease = 60s});
  auto second = make_service(cli.redis)->read_lock("cli:rw", {.lease = 60s});
  auto writers = make_service(cli.redis, [](dlock::Config& c) { c.lock.turn_window = 60s; });
  std::atomic<bool> written{false};
  std::thread writer([&] { written = static_cast<bool>(writers->try_write_lock("cli:rw", {.wait = 10s})); });
  REQUIRE(eventually([&] { return cli.redis.run({"ZCARD", "dlock:{cli:rw}:rw:queue"}) == "1"; }));
  const std::string reader_ids = cli.redis.run({"SMEMBERS", "dlock:{cli:rw}:rw:readers"});

  const auto result = cli.dlock({"unlock", "--force", "--read-write", "cli:rw"});
  INFO(result.out << result.err);
  CHECK(result.status == 0);
  CHECK(lines_containing(result.out, "removed reader") == 2);
  CHECK_THAT(result.out, Catch::Contains(reader_ids.substr(0, reader_ids.find(' '))));
  CHECK_THAT(result.err, Catch::Contains("forced unlock"));
  writer.join();
  CHECK(written);

  // The read-write lock of a key whose plain lock is free: the plain unlock finds nothing.
  CHECK(cli.dlock({"unlock", "--force", "cli:rw"}).status == 1);
}

TEST_CASE("dlock unlock --force --semaphore --owner returns one holder's permits and wakes the waiter",
          "[cli][semaphore]") {
  CliRedis cli;
  // A holder that crashed with a 60 s lease keeps its permit that long; the other is alive.
  auto stuck = cli.service->semaphore("cli:slots", 2).acquire(1, {.lease = 60s});
  const std::string stuck_id = cli.redis.run({"SMEMBERS", "dlock:{cli:slots}:semaphore:holders"});
  auto alive = cli.service->semaphore("cli:slots").acquire(1, {.lease = 60s});
  auto waiters = make_service(cli.redis, [](dlock::Config& c) { c.lock.turn_window = 60s; });
  std::atomic<bool> admitted{false};
  std::thread waiter([&] {
    admitted = static_cast<bool>(waiters->semaphore("cli:slots").try_acquire(1, {.wait = 10s}));
  });
  REQUIRE(eventually([&] { return cli.redis.run({"ZCARD", "dlock:{cli:slots}:semaphore:queue"}) == "1"; }));

  const auto result = cli.dlock({"unlock", "--force", "--semaphore", "cli:slots", "--owner", stuck_id});
  INFO(result.out << result.err);
  CHECK(result.status == 0);
  CHECK_THAT(result.out, Catch::Contains("removed holder " + stuck_id + " (1 permit)"));
  CHECK(lines_containing(result.out, "removed") == 1);
  waiter.join();
  CHECK(admitted);
  CHECK(cli.redis.run({"EXISTS", "dlock:{cli:slots}:semaphore:holders:" + stuck_id}) == "0");

  const auto unknown = cli.dlock({"unlock", "--force", "--semaphore", "cli:slots", "--owner", stuck_id});
  CHECK(unknown.status == 1);
  CHECK_THAT(unknown.err, Catch::Contains("not held by " + stuck_id));
}

TEST_CASE("dlock unlock --force --semaphore returns every permit, and their holders learn they lost them",
          "[cli][semaphore]") {
  CliRedis cli;
  auto holder = make_service(cli.redis, [](dlock::Config& c) { c.lock.watchdog_timeout = dlock::Millis(600); });
  std::atomic<bool> told{false};
  holder->on_lost([&](const std::string& name) { told = name == "cli:held"; });
  auto permits = holder->semaphore("cli:held", 4).acquire(3);
  auto writer = holder->write_lock("cli:held");

  const auto result = cli.dlock({"unlock", "--force", "--semaphore", "cli:held"});
  INFO(result.out << result.err);
  CHECK(result.status == 0);
  CHECK_THAT(result.out, Catch::Contains("(3 permits)"));
  CHECK(cli.redis.run({"EXISTS", "dlock:{cli:held}:semaphore:holders"}) == "0");
  CHECK(cli.redis.run({"GET", "dlock:{cli:held}:semaphore"}) == "4");  // the count stays
  CHECK(eventually([&] { return permits.lost(); }, 5s));
  CHECK(eventually([&] { return told.load(); }, 5s));
  CHECK_FALSE(writer.lost());  // the read-write lock of the same name is another thing

  CHECK(cli.dlock({"unlock", "--force", "--semaphore", "cli:held"}).status == 1);
}

TEST_CASE("dlock run --permits on a semaphore closed with set_permits(0) says it is closed and runs nothing",
          "[cli][semaphore]") {
  CliRedis cli;
  cli.service->semaphore("cli:closed", 2).set_permits(0);

  const auto result =
      cli.dlock({"run", "--permits", "cli:closed:2", "--wait", "1s", "--", "touch", cli.dir.file("ran")});
  INFO(result.err);
  CHECK(result.status == 75);
  CHECK_THAT(result.err, Catch::Contains("cli:closed") && Catch::Contains("closed") &&
                             Catch::Contains("set_permits"));
  CHECK_THAT(result.err, !Catch::Contains("usage:"));
  CHECK_FALSE(fs::exists(cli.dir.file("ran")));
}
