// Redlock (redis.mode: redlock): one lock over independent redis-servers,
// had when a majority granted it. Each case starts its own nodes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "deployment_yaml.hpp"
#include "lost_times.hpp"
#include "redlock_nodes.hpp"
#include "services.hpp"
#include "tcp_proxy.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using dlock::test::nodes_holding;
using dlock::test::RedlockNodes;

TEST_CASE("a Redlock lock is taken on every node, re-entered and released everywhere", "[redlock]") {
  RedlockNodes nodes;
  auto service = dlock::make_lock_service(nodes.config());
  {
    auto outer = service->lock("order");
    REQUIRE(outer);
    CHECK(nodes_holding(nodes, "order") == 5);
    {
      auto inner = service->lock("order");
      CHECK(service->hold_count("order") == 2);
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        const std::string fields = nodes[i].run({"HVALS", "dlock:{order}"});
        INFO("node " << i);
        CHECK(fields == "2");  // the hold count, set on every node
      }
    }
    // The token is the largest of the granting majority's counters (one node's
    // counter), and reading it raises every node's counter to at least it.
    const std::vector<std::string> drawn = nodes.run_everywhere({"GET", "dlock:{order}:fence"});
    const std::uint64_t token = outer.fencing_token();
    CHECK(std::count(drawn.begin(), drawn.end(), std::to_string(token)) >= 1);
    for (const std::string& counter : nodes.run_everywhere({"GET", "dlock:{order}:fence"})) {
      CHECK(std::stoull(counter) >= token);
    }
    CHECK(nodes_holding(nodes, "order") == 5);
  }
  CHECK(nodes_holding(nodes, "order") == 0);
  CHECK(service->stats().lost == 0);
}

TEST_CASE("a Redlock executor answers a plain command with what a majority of nodes answered alike, or not at all",
          "[redlock]") {
  // Callers beyond the lock's scripts (a waiter's look, the registry, the dlock command) read through it.
  RedlockNodes nodes(3);
  const auto redis = dlock::make_executor(nodes.config().redis);
  REQUIRE(nodes[0].run({"SET", "plain", "stray"}) == "OK");
  REQUIRE(nodes[1].run({"SET", "plain", "other"}) == "OK");
  // stray, other, nil: no majority agrees, so there is no answer to give.
  CHECK_THROWS_AS(redis->command({"GET", "plain"}), dlock::ConnectionError);
  // Nodes that differ most often got writes racing each other, in different orders: the message says so.
  CHECK_THROWS_WITH(redis->command({"GET", "plain"}),
                    Contains("answered differently") && Contains("write shared keys under a lock"));
  const std::vector<dlock::RedisReply> split = redis->pipeline({{"GET", "plain"}, {"EXISTS", "plain"}});
  REQUIRE(split.size() == 2);
  CHECK_THAT(split[0].str, Contains("DLOCK_NO_QUORUM"));
  CHECK(split[1].integer == 1);  // 1, 1, 0: a majority says it exists
  REQUIRE(nodes[2].run({"SET", "plain", "other"}) == "OK");
  CHECK(redis->command({"GET", "plain"}).str == "other");
  CHECK(redis->pipeline({{"GET", "plain"}}).front().str == "other");
}

TEST_CASE("a Redlock works with any two of five nodes paused or killed, and not with three", "[redlock][fault]") {
  RedlockNodes nodes;
  auto service = dlock::make_lock_service(nodes.config());
  nodes[1].freeze();
  nodes[3].kill();
  {
    auto guard = service->lock("sku", {.wait = 5s});
    REQUIRE(guard);
    CHECK(guard.fencing_token() > 0);  // raised on the three that answer
    CHECK_FALSE(guard.lost());
  }
  CHECK(nodes[0].run({"EXISTS", "dlock:{sku}"}) == "0");
  CHECK(nodes[2].run({"EXISTS", "dlock:{sku}"}) == "0");
  CHECK(nodes[4].run({"EXISTS", "dlock:{sku}"}) == "0");

  // A third node down: nobody can make a majority. lock() gives up within its
  // wait, saying which nodes failed, and leaves nothing held on those that answered.
  nodes[4].kill();
  const auto called = std::chrono::steady_clock::now();
  try {
    service->lock("sku", {.wait = 1500ms});
    FAIL("lock() succeeded with three of five nodes down");
  } catch (const dlock::ConnectionError& e) {
    CHECK_THAT(e.what(), Contains("2 of 5 nodes answered (a majority is 3)"));
    CHECK_THAT(e.what(), Contains(std::to_string(nodes[4].port())));
  }
  CHECK(dlock::test::elapsed_ms(called) < 1500 + 5000);  // the wait and the last try's node timeouts: no hang
  CHECK(nodes[0].run({"EXISTS", "dlock:{sku}"}) == "0");
  CHECK(nodes[2].run({"EXISTS", "dlock:{sku}"}) == "0");
  CHECK_THROWS_AS(service->try_lock("sku"), dlock::ConnectionError);

  // Back to a majority: it works again, with the paused node still paused.
  nodes[4].start();
  auto again = service->lock("sku", {.wait = 5s});
  CHECK(again);
  nodes[1].thaw();
}

TEST_CASE("a Redlock grant short of a majority is given back on the nodes that granted it", "[redlock]") {
  RedlockNodes nodes;
  auto service = dlock::make_lock_service(nodes.config());
  // Another owner holds three nodes (written by hand): only two can grant.
  for (std::size_t i = 0; i < 3; ++i) {
    nodes[i].run({"HSET", "dlock:{split}", "someone-else", "1"});
    nodes[i].run({"PEXPIRE", "dlock:{split}", "60000"});
  }
  CHECK_FALSE(service->try_lock("split"));
  CHECK(nodes[3].run({"EXISTS", "dlock:{split}"}) == "0");
  CHECK(nodes[4].run({"EXISTS", "dlock:{split}"}) == "0");
  // Waiting, it is also let back out of every line when its wait runs out.
  CHECK_THROWS_AS(service->lock("split", {.wait = 300ms}), dlock::LockTimeoutError);
  for (const std::string& reply : nodes.run_everywhere({"EXISTS", "dlock:{split}:queue"})) CHECK(reply == "0");
  CHECK(nodes[3].run({"EXISTS", "dlock:{split}"}) == "0");
  CHECK(nodes[4].run({"EXISTS", "dlock:{split}"}) == "0");
  CHECK(nodes[0].run({"HKEYS", "dlock:{split}"}) == "someone-else");
  // Freed on a majority, it is had.
  nodes[0].run({"DEL", "dlock:{split}"});
  auto guard = service->try_lock("split");
  CHECK(guard);
  CHECK(nodes_holding(nodes, "split") == 5);  // nodes 1 and 2 still hold the other owner's
}

TEST_CASE("a Redlock lock is kept by the watchdog and reported lost once no majority holds it", "[redlock][watchdog]") {
  RedlockNodes nodes;
  auto config = nodes.config();
  config.lock.watchdog_timeout = 1300ms;  // over 3 node timeouts (400 ms), as redlock mode requires
  auto service = dlock::make_lock_service(config);
  std::atomic<int> told{0};
  service->on_lost([&](const std::string& key) { told += key == "renewed" ? 1 : 100; });
  auto guard = service->lock("renewed");
  std::this_thread::sleep_for(2800ms);  // > 2 leases: only renewals keep it
  CHECK_FALSE(guard.lost());
  CHECK(nodes_holding(nodes, "renewed") == 5);
  // Two nodes forgetting it leave a majority; a third does not.
  nodes[0].run({"DEL", "dlock:{renewed}"});
  nodes[1].run({"DEL", "dlock:{renewed}"});
  std::this_thread::sleep_for(1000ms);  // more than two renewals
  CHECK_FALSE(guard.lost());
  nodes[2].run({"DEL", "dlock:{renewed}"});
  CHECK(dlock::test::eventually([&] { return guard.lost(); }, 3s));
  CHECK(dlock::test::eventually([&] { return told.load() == 1; }, 3s));
}

TEST_CASE("Redlock waiters are woken by the nodes' notices and each gets the lock in turn", "[redlock][waiting]") {
  RedlockNodes nodes;
  auto first = dlock::make_lock_service(nodes.config());
  auto second = dlock::make_lock_service(nodes.config());
  long long counter = 0;  // guarded by the lock
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      auto& service = t % 2 == 0 ? *first : *second;
      for (int i = 0; i < 25; ++i) {
        auto guard = service.lock("counter", {.wait = 20s});
        if (inside.fetch_add(1) != 0) overlapped = true;
        const long long seen = counter;
        std::this_thread::yield();
        counter = seen + 1;
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& worker : workers) worker.join();
  CHECK_FALSE(overlapped.load());
  CHECK(counter == 100);
  CHECK(nodes_holding(nodes, "counter") == 0);
}

TEST_CASE("a Redlock node paused past the leases lets no two holders overlap", "[redlock][fault]") {
  RedlockNodes nodes;
  auto config = nodes.config();
  config.lock.watchdog_timeout = 1300ms;
  auto first = dlock::make_lock_service(config);
  auto second = dlock::make_lock_service(config);
  dlock::test::ExclusionWorkers workers(*first, *second, "paused", {.wait = 10s, .lease = 400ms});
  std::this_thread::sleep_for(300ms);
  nodes[2].freeze();  // mid-traffic: its grants stay in it while its clock runs on
  std::this_thread::sleep_for(1500ms);
  nodes[2].thaw();  // after every lease it held ran out
  std::this_thread::sleep_for(700ms);
  workers.finish();
  CHECK_FALSE(workers.overlapped());
  CHECK(workers.cycles() > 10);
}

TEST_CASE("a Redlock node restarted empty gives no second owner while the lock is valid", "[redlock][fault]") {
  // Three nodes. The holder gets A and B (C is busy with another owner's
  // hold, written by hand); C is then freed and B restarts empty. B and C
  // would now grant a second owner: B's grant must not count until B has
  // been up for restarted_node_delay_ms, longer than any lease.
  RedlockNodes nodes(3);
  auto config = nodes.config(2500ms);
  config.lock.watchdog_timeout = 2000ms;
  // Fresh servers sit out the delay too: wait it out once. Redis' uptime is a
  // difference of whole seconds, so dlock takes a node to have run a second
  // less than it says: 4.2 s is read as at least 3 s, past the 2.5 s delay.
  std::this_thread::sleep_for(4200ms);
  auto holder_service = dlock::make_lock_service(config);
  auto other = dlock::make_lock_service(config);
  nodes[2].run({"HSET", "dlock:{restart}", "someone-else", "1"});
  nodes[2].run({"PEXPIRE", "dlock:{restart}", "60000"});
  { auto warm = other->lock("warm-up"); }  // `other` has pooled connections to B before the restart

  auto holder = holder_service->lock("restart", {.lease = 2000ms});
  REQUIRE(holder);
  REQUIRE(nodes[0].run({"EXISTS", "dlock:{restart}"}) == "1");
  REQUIRE(nodes[1].run({"EXISTS", "dlock:{restart}"}) == "1");
  nodes[2].run({"DEL", "dlock:{restart}"});
  nodes[1].kill();
  nodes[1].start();  // empty: no persistence
  auto newcomer = dlock::make_lock_service(config);  // first sees B after its restart

  bool second_owner = false;
  while (holder.remaining() > 0ms) {
    if (other->try_lock("restart") || newcomer->try_lock("restart")) second_owner = true;
    std::this_thread::sleep_for(20ms);
  }
  CHECK_FALSE(second_owner);
  // Once B has sat out its delay, the lock is to be had again.
  CHECK(dlock::test::eventually([&] { return static_cast<bool>(other->try_lock("restart")); }, 5s));
}

TEST_CASE("without the restart rule a Redlock node restarted empty lets a second owner in", "[redlock][fault]") {
  // The same steps with restarted_node_delay_ms: 0 (which claims the nodes
  // persist every write, and they do not): the rule above is what prevents it.
  RedlockNodes nodes(3);
  auto config = nodes.config(0ms);
  auto holder_service = dlock::make_lock_service(config);
  auto other = dlock::make_lock_service(config);
  nodes[2].run({"HSET", "dlock:{restart}", "someone-else", "1"});
  nodes[2].run({"PEXPIRE", "dlock:{restart}", "60000"});
  auto holder = holder_service->lock("restart", {.lease = 5000ms});
  REQUIRE(holder);
  nodes[2].run({"DEL", "dlock:{restart}"});
  nodes[1].kill();
  nodes[1].start();
  CHECK(dlock::test::eventually([&] { return static_cast<bool>(other->try_lock("restart")); }, 2s));
  CHECK(holder.remaining() > 0ms);
}

TEST_CASE("a Redlock holder is told at once when restarts leave too few nodes holding its lock, not at one restart",
          "[redlock][fault]") {
  // The default lease (30 s): the next renewal is 10 s away, so a verdict
  // within 3 s of a restart came from the round each restart triggers.
  RedlockNodes nodes(3);
  auto config = nodes.config(0ms);
  config.lock.watchdog_timeout = 30000ms;
  auto service = dlock::make_lock_service(config);
  dlock::test::LostTimes lost;
  lost.hook(*service);
  auto guard = service->lock("restarts");
  REQUIRE(nodes_holding(nodes, "restarts") == 3);
  std::this_thread::sleep_for(200ms);  // the service's watch on the nodes is connected

  // One node (B) restarted empty: A and C still hold the lock, a majority.
  // The round that B's return triggers renews it there, and nobody is told.
  const auto rounds_before = service->stats().renewal_rounds;
  nodes[1].kill();
  nodes[1].start();
  CHECK(dlock::test::eventually([&] { return service->stats().renewal_rounds > rounds_before; }, 3s));
  std::this_thread::sleep_for(500ms);
  CHECK(guard);
  CHECK_FALSE(lost.told("restarts"));

  // A second one (A): only C holds it now, and its holder is told once A answers again.
  nodes[0].kill();
  nodes[0].start();
  const auto up = std::chrono::steady_clock::now();
  const auto told_ms = lost.ms_after("restarts", up);
  REQUIRE(told_ms);
  std::cout << "redlock test: the holder was told " << *told_ms
            << " ms after the second restarted node answered (lease 30 s)\n";
  CHECK(*told_ms < 3000);
  CHECK(guard.lost());
}

TEST_CASE("Redlock nodes paused since before the service started cost a call one node timeout, not more",
          "[redlock][fault]") {
  // Such nodes never loaded the scripts: a call must not first try to load
  // them there, one after another, before it sends to the others. With a
  // 1000 ms lease, three such waits of 400 ms would spend the whole validity
  // on every try, and the lock could never be had.
  RedlockNodes nodes;
  nodes[0].freeze();
  nodes[1].freeze();
  auto service = dlock::make_lock_service(nodes.config());
  auto guard = service->lock("late-start", {.wait = 5s, .lease = 1000ms});
  CHECK(guard);
  nodes[0].thaw();
  nodes[1].thaw();
}

TEST_CASE("a Redlock grant's validity is counted from before the first node was sent the call", "[redlock]") {
  // Two of three nodes behind slow links: a majority needs a slow one's reply.
  RedlockNodes nodes(3);
  dlock::test::TcpProxy slow_a(nodes[1].port());
  dlock::test::TcpProxy slow_b(nodes[2].port());
  auto config = nodes.config();
  config.redis.command_timeout = 1000ms;
  config.redis.redlock.nodes[1].port = slow_a.port();
  config.redis.redlock.nodes[2].port = slow_b.port();
  auto service = dlock::make_lock_service(config);
  { auto warm = service->lock("warm-up"); }  // connections open before the links slow down
  slow_a.set_delay(200);                      // round trips of at least 400 ms
  slow_b.set_delay(200);
  constexpr auto lease = 3000ms;
  auto guard = service->lock("slow", {.lease = lease});
  REQUIRE(guard);
  // The majority's last reply came at least 400 ms after the call was sent: a
  // validity counted from the replies would be the whole lease less the drift (lease / 100 + 2 ms).
  CHECK(guard.remaining() <= lease - 400ms - (lease / 100 + 2ms));
  CHECK(guard.remaining() > 0ms);
  slow_a.set_delay(0);
  slow_b.set_delay(0);
}

TEST_CASE("Redlock fencing tokens grow from holder to holder even when the nodes' counters differ", "[redlock]") {
  RedlockNodes nodes;
  auto service = dlock::make_lock_service(nodes.config());
  // One node's counter far ahead of the others' (it was seeded from a clock running ahead).
  nodes[0].run({"SET", "dlock:{fenced}:fence", "5000000000000000"});
  std::uint64_t first = 0;
  {
    auto guard = service->lock("fenced");
    first = guard.fencing_token();
    CHECK(first == 5000000000000001ULL);
  }
  // That node gone, the next holder's majority is the others: its token must still be larger.
  nodes[0].kill();
  auto guard = service->lock("fenced", {.wait = 5s});
  CHECK(guard.fencing_token() > first);
}

TEST_CASE("a Redlock fencing token is refused once no majority holds the lock", "[redlock]") {
  RedlockNodes nodes(3);
  auto service = dlock::make_lock_service(nodes.config());
  auto guard = service->lock("taken");
  nodes[0].run({"DEL", "dlock:{taken}"});
  nodes[1].run({"DEL", "dlock:{taken}"});
  CHECK_THROWS_AS(guard.fencing_token(), dlock::LockLostError);
  CHECK(guard.lost());
}

TEST_CASE("a Redlock service refuses a node timeout of a third of the watchdog lease or more", "[redlock][arguments]") {
  RedlockNodes nodes(3);
  auto config = nodes.config();
  config.lock.watchdog_timeout = 1200ms;  // the node timeout is 400 ms
  CHECK_THROWS_WITH(dlock::make_lock_service(config), Contains("redis.command_timeout_ms"));
}

TEST_CASE("a Redlock service refuses one server listed under two names", "[redlock][arguments]") {
  RedlockNodes nodes(3);
  auto config = nodes.config();
  config.redis.redlock.nodes[2] = {"localhost", nodes[0].port()};
  CHECK_THROWS_WITH(dlock::make_lock_service(config), Contains("are the same redis-server"));
}

TEST_CASE("a Redlock service refuses a lease longer than a restarted node sits out", "[redlock][arguments]") {
  RedlockNodes nodes(3);
  auto config = nodes.config(0ms);
  config.redis.redlock.restarted_node_delay = 30000ms;
  // Fresh nodes would sit out 30 s: only the refusal is looked at here.
  auto service = dlock::make_lock_service(config);
  try {
    service->try_lock("long", {.lease = 60000ms});
    FAIL("a 60 s lease was accepted");
  } catch (const dlock::InvalidArgument& e) {
    CHECK_THAT(e.what(), Contains("redis.redlock.restarted_node_delay_ms"));
  }
}

TEST_CASE("dlock status shows a Redlock lock held by a majority as held, and a split as unknown", "[redlock][cli]") {
  RedlockNodes nodes;
  auto service = dlock::make_lock_service(nodes.config());
  const dlock::test::TempDir files;
  const std::string yaml = files.write("redlock.yaml", dlock::test::deployment_yaml(nodes.config().redis));
  const std::string status = std::string(DLOCK_CLI_BIN) + " status shown --config " + yaml;
  auto guard = service->lock("shown", {.lease = 60s});
  // Two nodes missed the grant (they answer alike: free), and the three that
  // have it were granted at different moments (their PTTLs differ).
  for (std::size_t i : {3, 4}) REQUIRE(nodes[i].run({"DEL", "dlock:{shown}"}) == "1");
  for (std::size_t i : {0, 1, 2}) {
    REQUIRE(nodes[i].run({"PEXPIRE", "dlock:{shown}", std::to_string(50000 + 1000 * i)}) == "1");
  }
  const dlock::test::CommandResult held = dlock::test::run_shell(status);
  INFO(held.output);
  CHECK(held.status == 0);
  CHECK_THAT(held.output, Contains("held by"));
  std::smatch lease;
  REQUIRE(std::regex_search(held.output, lease, std::regex("lease ([0-9]+)ms left")));
  CHECK(std::stoll(lease[1]) <= 50000);  // the smallest of the majority's

  // 2 held, 2 free, 1 stopped: no majority agrees, and dlock says so rather than guessing.
  REQUIRE(nodes[2].run({"DEL", "dlock:{shown}"}) == "1");
  REQUIRE(nodes[0].run({"DEL", "dlock:{shown}"}) == "1");
  REQUIRE(nodes[3].run({"HSET", "dlock:{shown}", "someone", "1"}) == "1");
  nodes[4].kill();
  const dlock::test::CommandResult split = dlock::test::run_shell(status);
  INFO(split.output);
  CHECK(split.status == 69);
  CHECK_THAT(split.output, Contains("no majority") && !Contains("free") && !Contains("held by"));
}

TEST_CASE("review: dlock status shows a Redlock lock held by a majority whose hold counts differ as held",
          "[redlock][cli][review]") {
  // Three nodes. The grant reaches A and B (C is down and comes back empty).
  // A re-entry then reaches A only (B refuses it: here a missing ACL right,
  // as well a BUSY or a node cut off), so it fails: A counts 2 holds, B
  // still 1. The lock stays held by a majority (A and B) for the holder, and
  // nobody else can take it; but the nodes now disagree on the hold COUNT.
  RedlockNodes nodes(3);
  auto config = nodes.config();
  auto service = dlock::make_lock_service(config);
  auto other = dlock::make_lock_service(config);
  const dlock::test::TempDir files;
  const std::string yaml = files.write("redlock.yaml", dlock::test::deployment_yaml(config.redis));
  const std::string status = std::string(DLOCK_CLI_BIN) + " status split-count --config " + yaml;

  nodes[2].kill();
  auto outer = service->lock("split-count", {.lease = 60s});
  REQUIRE(outer);
  nodes[2].start();  // empty: no persistence

  REQUIRE(nodes[1].run({"ACL", "SETUSER", "default", "-evalsha"}) == "OK");
  bool reentered = true;
  try {
    auto inner = service->lock("split-count", {.wait = 300ms, .lease = 60s});
    reentered = static_cast<bool>(inner);
  } catch (const dlock::Error&) {
    reentered = false;
  }
  REQUIRE(nodes[1].run({"ACL", "SETUSER", "default", "+evalsha"}) == "OK");
  REQUIRE_FALSE(reentered);

  // What the nodes hold now: owner counts 2 on A, 1 on B, nothing on C.
  INFO(nodes[0].run({"HGETALL", "dlock:{split-count}"}) << " | " << nodes[1].run({"HGETALL", "dlock:{split-count}"})
                                                         << " | " << nodes[2].run({"EXISTS", "dlock:{split-count}"}));
  // The library: still held (a majority holds this owner), and by nobody else.
  CHECK(outer);
  CHECK(service->hold_count("split-count") == 1);
  CHECK_FALSE(other->try_lock("split-count"));

  const dlock::test::CommandResult held = dlock::test::run_shell(status);
  INFO(held.output);
  CHECK(held.status == 0);
  CHECK_THAT(held.output, Contains("held by"));
  CHECK_THAT(held.output, Contains("(hold count 2)"));  // the largest the agreeing nodes hold
}

TEST_CASE("review: dlock status over a Redlock on a name holding another type exits 76 and says so, as on one Redis",
          "[redlock][cli][review]") {
  // docs/cli.md: status exits 76 when "Redis refused a read (a name holding another type, a missing ACL right)",
  // and 69 only for unreachable / "not now". Every node answers WRONGTYPE here: a "no", on all nodes alike.
  RedlockNodes nodes(3);
  auto config = nodes.config();
  const dlock::test::TempDir files;
  const std::string yaml = files.write("redlock.yaml", dlock::test::deployment_yaml(config.redis));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    REQUIRE(nodes[i].run({"SET", "dlock:{typed}", "someone else's string"}) == "OK");
  }
  const dlock::test::CommandResult typed =
      dlock::test::run_shell(std::string(DLOCK_CLI_BIN) + " status typed --config " + yaml);
  INFO(typed.output);
  CHECK(typed.status == 76);
  CHECK_THAT(typed.output, Contains("WRONGTYPE"));
  CHECK_THAT(typed.output, !Contains("try again"));
}

#ifdef FLASH_SALE_BIN  // the examples are built
TEST_CASE("flash_sale and the dlock command run over a Redlock from one YAML file", "[redlock][examples]") {
  RedlockNodes nodes;
  const dlock::test::TempDir files;
  // Not the fixture's 400 ms (made for paused nodes): 5 servers and 8 buyer threads under a sanitizer on a
  // loaded machine can take that long to answer a plain command, and the sale would fail for it.
  dlock::RedisConfig redis = nodes.config().redis;
  redis.command_timeout = redis.connect_timeout = std::chrono::milliseconds(3000);
  const std::string yaml = files.write("redlock.yaml", dlock::test::deployment_yaml(redis));
  dlock::test::check_examples_and_cli(yaml, "REDLOCK");
}
#endif

TEST_CASE("a Redlock lock refused because fresh nodes sit out their restart delay says so and until when",
          "[redlock]") {
  RedlockNodes nodes(3);
  // Every node just started: each sits out 30 s before its grants count.
  auto service = dlock::make_lock_service(nodes.config(30000ms));
  const auto called = std::chrono::system_clock::now();
  try {
    service->lock("fresh", {.wait = 0ms});
    FAIL("a lock was had from nodes that may not vote yet");
  } catch (const dlock::RestartDelayError& e) {
    INFO(e.what());
    CHECK_THAT(e.what(), Contains("3 of 3 nodes answered") && Contains("3 of them within their restart delay"));
    CHECK_THAT(e.what(), Contains("redis.redlock.restarted_node_delay_ms") && Contains(" s left"));
    CHECK_THAT(e.what(), Contains("may vote from 20"));  // a UTC time, 2026-...Z
    // Up a few seconds at most: most of the 30 s are still to sit out (a value, not a speed).
    CHECK(e.votes_from() > called + 10s);
    CHECK(e.votes_from() <= called + 31s);
  }
  // Still a ConnectionError: code that waits out outages waits this out too.
  CHECK_THROWS_AS(service->lock("fresh", {.wait = 0ms}), dlock::ConnectionError);
}
