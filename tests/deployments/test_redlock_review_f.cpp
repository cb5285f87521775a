// Review F (break-it review of the Redlock leftovers: replies kept owed on a
// node's connection, give-backs after the acquire, releases to resting
// nodes). Each case reproduces a defect and fails on the code it was written
// against; the comment above each says what it shows.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "redlock_nodes.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using dlock::test::RedisServer;
using dlock::test::RedlockNodes;

namespace {

// Another owner's hold on one node, written by hand.
void hold_elsewhere(RedisServer& node, const std::string& key) {
  node.run({"HSET", "dlock:{" + key + "}", "someone-else", "1"});
  node.run({"PEXPIRE", "dlock:{" + key + "}", "60000"});
}

// The keys among `keys` that `node` still has a lock hash for.
std::vector<std::string> still_held(RedisServer& node, const std::vector<std::string>& keys) {
  std::vector<std::string> held;
  for (const auto& key : keys) {
    if (node.run({"EXISTS", "dlock:{" + key + "}"}) == "1") held.push_back(key);
  }
  return held;
}

// A config whose node timeout (2 s) outlasts the calls below: the frozen
// node does not start resting midway (a resting node is not sent acquires).
dlock::Config patient(const RedlockNodes& nodes) {
  dlock::Config config = nodes.config();
  config.redis.command_timeout = 2000ms;
  return config;
}

// Fifteen calls left owed on a frozen node's one connection: the lock
// `first` stays held (its acquire), then seven lock+unlock cycles (an
// acquire and a release each). Returns the cycles' keys.
std::vector<std::string> fill_owed_chain(dlock::RedisLockService& service, dlock::LockGuard& first) {
  first = service.lock("first");
  std::vector<std::string> keys;
  for (int i = 0; i < 7; ++i) {
    keys.push_back("cycle-" + std::to_string(i));
    auto guard = service.try_lock(keys.back());
    REQUIRE(guard);
    guard.unlock();
  }
  return keys;
}

}  // namespace

// A frozen node's replies are kept owed on one connection, and every later
// call's command follows on it (PooledPendingReply::then). then() refuses a
// 17th reply (kMostOwed = 16), and send_to_node then skips the node ("it
// still owes replies to earlier calls") -- for a release too. Here the 16th
// command on the chain is an acquire (the cycle `extra`); its release is the
// 17th, refused, and never sent: once the node thaws, it runs the acquire
// and keeps that released holder's grant for the whole lease (30 s).
// docs/deployments.md: "A release ... reaches a resting node that owes a reply on that
// connection (it runs when the node wakes)". Fails every run (6/6).
TEST_CASE("review f: a release reaches a frozen node however many replies it owes", "[redlock][review]") {
  RedlockNodes nodes(3);
  auto service = dlock::make_lock_service(patient(nodes));
  { auto warm_up = service->lock("warm-up"); }
  // Node 2 has run the warm-up's release, so no reply of it is owed when the count below starts.
  REQUIRE(dlock::test::eventually([&] { return nodes[2].run({"EXISTS", "dlock:{warm-up}"}) == "0"; }));
  std::this_thread::sleep_for(50ms);
  nodes[2].freeze();
  dlock::LockGuard first;
  std::vector<std::string> keys = fill_owed_chain(*service, first);  // 15 owed
  keys.push_back("extra");
  {
    auto guard = service->try_lock("extra");  // its acquire is the 16th command on the chain
    REQUIRE(guard);
    guard.unlock();  // the 17th: refused by then(), skipped by send_to_node
  }
  nodes[2].thaw();
  // Node 2 runs what it was sent; every released lock must be gone from it.
  std::vector<std::string> left;
  const bool freed = dlock::test::eventually(
      [&] {
        left = still_held(nodes[2], keys);
        return left.empty();
      },
      3s);
  INFO("locks released but still held on node 2: " << Catch::Detail::stringify(left)
                                                    << ", PTTL of extra: " << nodes[2].run({"PTTL", "dlock:{extra}"}));
  CHECK(freed);
}

// The same cap, for the give-back of a failed acquire: the acquire that is
// the 16th command on the frozen node's chain is refused by the others
// (busy), so it is given back; then() on the acquire's own connection
// refuses the give-back (the 17th), and send_to_node skips the node (the
// acquire waited out its whole node timeout, so the node rests, and owed_ is
// empty: the chain is the acquire's own, kept only after the give-back). The
// node, thawed, grants the failed acquire and keeps the grant for the whole
// lease (30 s): a grant nobody holds, that blocks the node for a lease. Fails every run (6/6).
TEST_CASE("review f: a failed acquire is given back on a frozen node however many replies it owes",
          "[redlock][review]") {
  RedlockNodes nodes(3);
  auto service = dlock::make_lock_service(patient(nodes));
  { auto warm_up = service->lock("warm-up"); }
  // Node 2 has run the warm-up's release, so no reply of it is owed when the count below starts.
  REQUIRE(dlock::test::eventually([&] { return nodes[2].run({"EXISTS", "dlock:{warm-up}"}) == "0"; }));
  std::this_thread::sleep_for(50ms);
  hold_elsewhere(nodes[0], "given-back");
  hold_elsewhere(nodes[1], "given-back");
  nodes[2].freeze();
  dlock::LockGuard first;
  (void)fill_owed_chain(*service, first);  // 15 owed
  CHECK_FALSE(service->try_lock("given-back"));  // the 16th command; its give-back would be the 17th
  nodes[2].thaw();
  // Node 2 runs the acquire once thawed; its grant must be given back.
  REQUIRE(dlock::test::eventually([&] { return nodes[2].run({"EXISTS", "dlock:{given-back}:fence"}) == "1"; }));
  const bool freed =
      dlock::test::eventually([&] { return nodes[2].run({"EXISTS", "dlock:{given-back}"}) == "0"; }, 3s);
  INFO("node 2's grant of a failed acquire, PTTL " << nodes[2].run({"PTTL", "dlock:{given-back}"}));
  CHECK(freed);
}

// A node silent for a command timeout rests for a second. If it wakes within
// that second and its owed replies arrive, the next call's settle() drains
// them (the node is plainly answering again), owed_ is empty, and the
// release is skipped for "resting" -- although the node is up and a pooled
// connection to it idle. The released holder's grant stays there for the
// whole lease. (docs/deployments.md accepts a release skipped for a node "resting with no
// connection left"; here the node has just answered on its connection, and
// the rule only exists to spare a paused node new connections.) Fails every run (6/6).
TEST_CASE("review f: a release reaches a node that woke within its rest", "[redlock][review]") {
  RedlockNodes nodes(3);
  auto service = dlock::make_lock_service(nodes.config());
  auto held = service->lock("released");
  REQUIRE(nodes[2].run({"EXISTS", "dlock:{released}"}) == "1");
  hold_elsewhere(nodes[0], "split");
  nodes[2].freeze();
  // Node 0 says busy, node 1 grants, node 2 says nothing: undecided until its
  // command timeout (400 ms), then it rests for 1 s; the acquire and its
  // give-back stay owed on its connection.
  try {
    (void)service->try_lock("split");
  } catch (const dlock::Error&) {
  }
  nodes[2].thaw();
  std::this_thread::sleep_for(150ms);  // node 2 answers what it owes; well within its rest
  held.unlock();
  const bool freed =
      dlock::test::eventually([&] { return nodes[2].run({"EXISTS", "dlock:{released}"}) == "0"; }, 3s);
  INFO("node 2's grant, PTTL " << nodes[2].run({"PTTL", "dlock:{released}"}));
  CHECK(freed);
}

