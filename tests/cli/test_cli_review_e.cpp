// Review E: the `dlock` command deciding by majority over a Redlock,
// attacked. Each case reproduces a defect, failing on the code it was
// written against. Tag [review].
#include <catch2/catch.hpp>

#include <unistd.h>

#include <string>

#include "cli_harness.hpp"
#include "deployment_yaml.hpp"
#include "redlock_cli.hpp"
#include "redlock_nodes.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using namespace dlock::test;

// --- Defect: one node's refusal decides `dlock list` -------------------------
// docs/deployments.md, Redlock mode: "The dlock command decides by a majority of the nodes
// everywhere, never by one node's reply ... a refusal a majority gave alike
// as that refusal (exit 76) ... A node down is passed over while a majority
// answers." `dlock status` and `unlock --force` keep that (NodeScript passes
// over a minority that refuses). `dlock list` does not: SCAN refused by ONE
// node of three (its user lacks +scan) throws RedisError out of the parallel
// scan (list_scan.cpp: scan_hashes -> throw_refusal; node_reads.cpp:
// rethrow_unless_unreachable rethrows all but ConnectionError), and list
// exits 76 listing nothing, although two nodes of three answered and hold
// the lock.
TEST_CASE("review E: dlock list over a Redlock lists what a majority holds though one node refuses SCAN",
          "[review][cli][redlock][acl]") {
  ThreeNodes redlock;
  auto held = redlock.service->lock("cli:refused", {.lease = 60s});
  REQUIRE(held);
  // Node 0's user may no longer SCAN; nodes 1 and 2, a majority, answer as before.
  REQUIRE(redlock.nodes[0].run({"ACL", "SETUSER", "default", "-scan"}) == "OK");

  // status, by the same majority rule, shows the lock held.
  const auto status = redlock.dlock({"status", "cli:refused"});
  INFO(status.out << status.err);
  CHECK(status.status == 0);

  const auto list = redlock.dlock({"list", "--json"});
  INFO(list.out << list.err);
  CHECK(list.status == 0);                                          // failed: 76
  CHECK(lines_containing(list.out, "\"key\":\"cli:refused\"") == 1);  // failed: nothing listed
}
