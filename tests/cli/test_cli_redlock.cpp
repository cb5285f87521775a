// The `dlock` command over a Redlock (redis.mode: redlock): every command
// decides by a majority of the nodes, never by the first node's reply or the
// reply most nodes gave (the nodes' hold counts and PTTLs differ even when
// they agree on the owner). Each case starts its own nodes.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <string>

#include "cli_harness.hpp"
#include "deployment_yaml.hpp"
#include "redlock_nodes.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using namespace dlock::test;

namespace {

// Three nodes, a service over them, and the YAML an operator would pass to dlock.
struct ThreeNodes {
  RedlockNodes nodes{3};
  dlock::Config config = nodes.config();
  std::shared_ptr<dlock::RedisLockService> service = dlock::make_lock_service(config);
  TempDir dir;
  std::string yaml = dir.write("redlock.yaml", deployment_yaml(config.redis));

  Result dlock(const std::vector<std::string>& args) const { return dlock_cli_with(dir, yaml, args); }
  // The acquisition id holding `key` on node `i`.
  std::string owner(std::size_t i, const std::string& key) { return nodes[i].run({"HKEYS", "dlock:{" + key + "}"}); }
};

}  // namespace

TEST_CASE("dlock run over a Redlock names the holder a majority holds when the lock is busy", "[cli][redlock]") {
  ThreeNodes redlock;
  auto guard = redlock.service->lock("cli:busy", {.lease = 60s});
  const std::string owner = redlock.owner(1, "cli:busy");
  // Every node answers differently: another count on node 1, a stray grant of someone else on node 0.
  REQUIRE(redlock.nodes[1].run({"HSET", "dlock:{cli:busy}", owner, "2"}) == "0");
  REQUIRE(redlock.nodes[0].run({"DEL", "dlock:{cli:busy}"}) == "1");
  REQUIRE(redlock.nodes[0].run({"HSET", "dlock:{cli:busy}", "stray-owner", "1"}) == "1");

  const auto result = redlock.dlock({"run", "cli:busy", "--", "true"});
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
