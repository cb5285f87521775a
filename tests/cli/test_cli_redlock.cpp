// The `dlock` command over a Redlock (redis.mode: redlock): every command
// decides by a majority of the nodes, never by the first node's reply or the
// reply most nodes gave (the nodes' hold counts and PTTLs differ even when
// they agree on the owner). Each case starts its own nodes.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_harness.hpp"
#include "deployment_yaml.hpp"
#include "redlock_cli.hpp"
#include "redlock_nodes.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using namespace dlock::test;

TEST_CASE("dlock list over a Redlock lists a lock a majority holds and leaves out one a minority holds",
          "[cli][redlock]") {
  ThreeNodes redlock;
  // Taken while node 0 was down; node 0 came back empty (no persistence).
  redlock.nodes[0].kill();
  auto held = redlock.service->lock("cli:majority", {.lease = 60s});
  redlock.nodes[0].start();
  // A hash on node 0 alone: no majority holds it, and status says it is free.
  REQUIRE(redlock.nodes[0].run({"HSET", "dlock:{cli:minority}", "someone", "1"}) == "1");

  const auto json = redlock.dlock({"list", "--json"});
  INFO(json.out << json.err);
  CHECK(json.status == 0);
  CHECK(lines_containing(json.out, "\"key\":\"cli:majority\"") == 1);  // once, though every node was scanned
  CHECK(lines_containing(json.out, "cli:minority") == 0);
  CHECK(json_field(json.out, "pid") == std::to_string(::getpid()));

  const auto status = redlock.dlock({"status", "cli:minority"});
  CHECK_THAT(status.out, Contains("free"));
}

TEST_CASE("dlock list over a Redlock shows a lock no majority agrees on as unknown and exits 69", "[cli][redlock]") {
  ThreeNodes redlock;
  REQUIRE(redlock.nodes[0].run({"HSET", "dlock:{cli:split}", "one-owner", "1"}) == "1");
  REQUIRE(redlock.nodes[1].run({"HSET", "dlock:{cli:split}", "another-owner", "1"}) == "1");

  const auto table = redlock.dlock({"list"});
  INFO(table.out << table.err);
  CHECK(table.status == 69);
  CHECK(lines_containing(table.out, "cli:split  lock  unknown") == 1);  // its row, once
  CHECK(lines_containing(table.out, "cli:split: unknown; ") == 1);      // and why, under the table
  CHECK_THAT(table.out, Contains("no majority"));
  CHECK_THAT(table.out, !Contains("one-owner") && !Contains("another-owner"));

  const auto json = redlock.dlock({"list", "--json"});
  INFO(json.out);
  CHECK(json.status == 69);
  CHECK(json_field(json.out, "key") == "\"cli:split\"");
  CHECK(json_field(json.out, "owner") == "null");
  CHECK_THAT(json_field(json.out, "error"), Contains("no majority"));
}

TEST_CASE("dlock unlock --force over a Redlock reports the owner a majority held though the hold counts differ",
          "[cli][redlock]") {
  ThreeNodes redlock;
  auto guard = redlock.service->lock("cli:counts", {.lease = 60s});
  const std::string owner = redlock.owner(1, "cli:counts");
  // A re-entry reached nodes 0 and 1 but not node 2; then node 0 restarted empty.
  REQUIRE(redlock.nodes[1].run({"HSET", "dlock:{cli:counts}", owner, "2"}) == "0");
  redlock.nodes[0].kill();
  redlock.nodes[0].start();

  const auto result = redlock.dlock({"unlock", "--force", "cli:counts"});
  INFO(result.out << result.err);
  CHECK(result.status == 0);
  CHECK_THAT(result.out, Contains("removed owner " + owner + " (hold count 2)"));
  CHECK_THAT(result.out, Contains("2 of 3 nodes"));
  for (const std::string& exists : redlock.nodes.run_everywhere({"EXISTS", "dlock:{cli:counts}"})) {
    CHECK(exists == "0");
  }

  const auto again = redlock.dlock({"unlock", "--force", "cli:counts"});
  CHECK(again.status == 1);
  CHECK_THAT(again.err, Contains("not held"));
}

TEST_CASE("dlock unlock --force over a Redlock tells a stray grant from an owner some silent nodes may hold",
          "[cli][redlock]") {
  ThreeNodes redlock;
  // A grant on node 0 alone, the others answering: a minority's, not the lock's holder.
  REQUIRE(redlock.nodes[0].run({"HSET", "dlock:{cli:stray}", "stray-owner", "1"}) == "1");
  const auto stray = redlock.dlock({"unlock", "--force", "cli:stray"});
  INFO(stray.out << stray.err);
  CHECK(stray.status == 1);
  CHECK_THAT(stray.out, Contains("removed a grant no majority of the nodes held") && Contains("stray-owner"));
  CHECK_THAT(stray.err, Contains("not held by a majority of the nodes"));
  CHECK(redlock.nodes[0].run({"EXISTS", "dlock:{cli:stray}"}) == "0");

  // A grant on nodes 0 and 1, node 1 now down: with it, a majority may hold it.
  for (std::size_t i : {0, 1}) REQUIRE(redlock.nodes[i].run({"HSET", "dlock:{cli:silent}", "an-owner", "1"}) == "1");
  redlock.nodes[1].kill();
  const auto silent = redlock.dlock({"unlock", "--force", "cli:silent"});
  INFO(silent.out << silent.err);
  CHECK(silent.status == 0);
  CHECK_THAT(silent.out, Contains("unlocked; removed owner an-owner (hold count 1) on 1 of 3 nodes; 1 did not answer"));
}

TEST_CASE("dlock run over a Redlock names the holder a majority holds when the lock is busy", "[cli][redlock]") {
  ThreeNodes redlock;
  auto guard = redlock.service->lock("cli:busy", {.lease = 60s});
  const std::string owner = redlock.owner(1, "cli:busy");
  // Every node answers differently: another count on node 1, a stray grant of someone else on node 0.
  REQUIRE(redlock.nodes[1].run({"HSET", "dlock:{cli:busy}", owner, "2"}) == "0");
  REQUIRE(redlock.nodes[0].run({"DEL", "dlock:{cli:busy}"}) == "1");
  REQUIRE(redlock.nodes[0].run({"HSET", "dlock:{cli:busy}", "stray-owner", "1"}) == "1");

  const auto result = redlock.dlock({"run", "cli:busy", "--wait", "0", "--", "true"});
  INFO(result.err);
  CHECK(result.status == 75);
  CHECK_THAT(result.err, Contains("held by pid " + std::to_string(::getpid()) + " on "));
}

TEST_CASE("dlock status and list over a Redlock name the holder though some nodes lack its registry entry",
          "[cli][redlock]") {
  ThreeNodes redlock;
  auto guard = redlock.service->lock("cli:who", {.lease = 60s});
  const std::string owner = redlock.owner(0, "cli:who");
  // The entry is gone from node 0 (as after a restart) and node 1 is down: the nodes that answer disagree.
  REQUIRE(redlock.nodes[0].run({"DEL", "dlock:instance:" + owner.substr(0, 32)}) == "1");
  redlock.nodes[1].kill();

  const auto status = redlock.dlock({"status", "cli:who", "--json"});
  INFO(status.out << status.err);
  CHECK(status.status == 0);
  CHECK(json_field(status.out, "held") == "true");
  CHECK(json_field(status.out, "pid") == std::to_string(::getpid()));
  const auto list = redlock.dlock({"list", "--json"});
  INFO(list.out << list.err);
  CHECK(list.status == 0);
  CHECK(json_field(list.out, "pid") == std::to_string(::getpid()));
}

TEST_CASE("dlock status over a Redlock shows no read-write lock or semaphore, which a Redlock does not offer",
          "[cli][redlock]") {
  ThreeNodes redlock;
  // Records some other client left on two nodes, each different: a Redlock service never writes these.
  REQUIRE(redlock.nodes[0].run({"HSET", "dlock:{cli:stray}:rw:write", "one-writer", "1"}) == "1");
  REQUIRE(redlock.nodes[1].run({"HSET", "dlock:{cli:stray}:rw:write", "another-writer", "1"}) == "1");

  const auto status = redlock.dlock({"status", "cli:stray", "--json"});
  INFO(status.out << status.err);
  CHECK(status.status == 0);
  CHECK(json_field(status.out, "read_write") == "null");
  CHECK_THAT(status.out, !Contains("one-writer"));
}

TEST_CASE("dlock run over a Redlock names the nodes that are read-only replicas", "[cli][redlock]") {
  ThreeNodes redlock;
  const std::string master = std::to_string(redlock.nodes[0].port());
  for (std::size_t i : {1, 2}) REQUIRE(redlock.nodes[i].run({"REPLICAOF", "127.0.0.1", master}) == "OK");

  const auto result = redlock.dlock({"run", "cli:replicas", "--", "true"});
  INFO(result.err);
  CHECK(result.status == 76);
  CHECK_THAT(result.err, Contains("127.0.0.1:" + std::to_string(redlock.nodes[1].port())) &&
                             Contains("127.0.0.1:" + std::to_string(redlock.nodes[2].port())));
  CHECK_THAT(result.err, Contains("read-only replica") && Contains("redis.redlock.nodes"));
  CHECK_THAT(result.err, !Contains("redis.host"));
}

// The command read the nodes one after another before it asked them at once:
// each paused node cost it a whole command timeout of its own.
TEST_CASE("dlock status and list and unlock over a Redlock ask the nodes at once: two paused nodes cost one timeout",
          "[cli][redlock]") {
  RedlockNodes nodes(5);
  auto config = nodes.config();
  config.redis.command_timeout = 3000ms;
  config.redis.connect_timeout = 3000ms;
  auto service = dlock::make_lock_service(config);
  auto held = service->lock("cli:paused", {.lease = 60s});
  TempDir dir;
  const std::string yaml = dir.write("redlock.yaml", deployment_yaml(config.redis));
  nodes[3].freeze();
  nodes[4].freeze();
  for (const std::vector<std::string>& args : {std::vector<std::string>{"status", "cli:paused"},
                                               std::vector<std::string>{"list"},
                                               std::vector<std::string>{"unlock", "--force", "cli:paused"}}) {
    const auto started = std::chrono::steady_clock::now();
    const auto result = dlock_cli_with(dir, yaml, args);
    const long long took = elapsed_ms(started);
    INFO(args.front() << " took " << took << " ms: " << result.out << result.err);
    CHECK(result.status == 0);     // three of five answered: a majority
    CHECK(took < 5500);            // one 3 s timeout for both paused nodes; two or more (6 s+) one after another
  }
  nodes[3].thaw();
  nodes[4].thaw();
  CHECK(nodes[0].run({"EXISTS", "dlock:{cli:paused}"}) == "0");  // the forced release reached the majority
}

TEST_CASE("dlock run over fresh Redlock nodes says they are within their restart delay and until when",
          "[cli][redlock]") {
  RedlockNodes nodes(3);
  TempDir dir;
  // Each node just started: it sits out 30 s before its grants count.
  const std::string yaml = dir.write("fresh.yaml", deployment_yaml(nodes.config(30000ms).redis));
  const auto result = dlock_cli_with(dir, yaml, {"run", "cli:fresh", "--wait", "0", "--", "touch", dir.file("ran")});
  INFO(result.err);
  CHECK(result.status == 69);
  CHECK_THAT(result.err, Contains("too few may vote yet (restart delay)"));
  CHECK_THAT(result.err, Contains("redis.redlock.restarted_node_delay_ms") && Contains("may vote from 20"));
  CHECK_THAT(result.err, !Contains("unreachable"));
  CHECK_FALSE(std::filesystem::exists(dir.file("ran")));
}
