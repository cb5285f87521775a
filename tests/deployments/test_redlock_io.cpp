// Redlock mode (connections, threads and failure modes): the break-it reviews' reproductions, each a defect found
// and fixed (or a regression check the review kept).

#include <catch2/catch.hpp>

#include <thread>

#include "redlock_nodes.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using dlock::test::RedisServer;
using dlock::test::RedlockNodes;

namespace {

// A Redlock config over servers built by the test (extra args per server).
dlock::Config redlock_over(const std::vector<std::unique_ptr<RedisServer>>& servers) {
  dlock::Config config = servers.front()->config();
  config.redis.mode = dlock::RedisMode::redlock;
  config.redis.command_timeout = 400ms;
  config.redis.connect_timeout = 400ms;
  config.redis.redlock.restarted_node_delay = 0ms;
  config.redis.redlock.nodes.clear();
  for (const auto& server : servers) config.redis.redlock.nodes.push_back({server->host(), server->port()});
  return config;
}

// lock() over five nodes of which the first is started with `bad_node_args`: four good nodes must be enough.
void check_four_good_nodes_suffice(const std::vector<std::string>& bad_node_args, const std::string& key) {
  std::vector<std::unique_ptr<RedisServer>> servers;
  servers.push_back(std::make_unique<RedisServer>(bad_node_args));
  for (int i = 0; i < 4; ++i) servers.push_back(std::make_unique<RedisServer>());
  auto service = dlock::make_lock_service(redlock_over(servers));
  try {
    auto guard = service->lock(key, {.wait = 2s});
    CHECK(guard);
  } catch (const std::exception& e) {
    FAIL("lock() threw with four good nodes of five: " << e.what());
  }
}

}  // namespace

// One node of five whose user may not run SCRIPT (an ACL or rename-command
// slip on one machine): start-up tolerates it (a majority loaded the
// scripts), but every call then asks that node's runner for the SHA, which
// tries SCRIPT LOAD and throws RedisError past ask_every_node's
// catch (ConnectionError): no lock can be had although four nodes are fine.
TEST_CASE("redlock io: one node refusing SCRIPT LOAD does not stop a Redlock of five", "[redlock]") {
  check_four_good_nodes_suffice({"--rename-command", "SCRIPT", ""}, "bad-node");
}

// A fixed lease shorter than the command timeout, one node of three paused:
// every try reads the paused node until the command timeout, so its round
// trip always "spends the validity" and the grant of the two healthy nodes is
// given back. The lock is free, yet never had.
TEST_CASE("redlock io: a short fixed lease is had while one node of three is paused", "[redlock]") {
  RedlockNodes nodes(3);
  auto config = nodes.config();
  config.redis.command_timeout = 1000ms;  // the default
  auto service = dlock::make_lock_service(config);
  nodes[2].freeze();
  const auto called = std::chrono::steady_clock::now();
  try {
    auto guard = service->lock("short-lease", {.wait = 3s, .lease = 500ms});
    CHECK(guard);
  } catch (const std::exception& e) {
    FAIL("lock() of a free lock failed after " << dlock::test::elapsed_ms(called) << " ms: " << e.what());
  }
  nodes[2].thaw();
}

// try_lock of a lock another service holds, one node of three paused: the
// paused node's missing reply puts it on the give-back list, and give_back()
// sends it a release and waits for it a second command timeout.
TEST_CASE("redlock io: a refused try_lock costs one command timeout with one node paused, not two",
          "[redlock][timing]") {
  RedlockNodes nodes(3);
  auto config = nodes.config();
  config.redis.command_timeout = 1000ms;
  auto holder = dlock::make_lock_service(config);
  auto other = dlock::make_lock_service(config);
  auto held = holder->lock("taken");
  nodes[2].freeze();
  (void)other->try_lock("warm-up");  // the paused node's connections are in use from here on
  const auto called = std::chrono::steady_clock::now();
  auto guard = other->try_lock("taken");
  const long long took = dlock::test::elapsed_ms(called);
  nodes[2].thaw();
  CHECK_FALSE(guard);
  CHECK(took < 2500);  // one command timeout and change; it was three before the fix
}

// The same with a likelier cause: one node of five got a password (rotated
// there first) that the config does not have yet. PING's NOAUTH at start-up
// counts as that node being down; afterwards SCRIPT LOAD's NOAUTH is a
// RedisError that ends every lock() call.
TEST_CASE("redlock io: one node demanding a password the config lacks does not stop a Redlock of five",
          "[redlock]") {
  check_four_good_nodes_suffice({"--requirepass", "rotated"}, "password-node");
}

// The config check refuses "127.0.0.1:P" twice ("one server would count twice
// toward the majority"), but not "127.0.0.1:P" with "localhost:P": the same
// server under two names gives two votes, and a "majority" of three is had
// with one server alive. connect() could compare INFO server's run_id.
TEST_CASE("redlock io: one server listed under two names is not counted twice", "[redlock][config]") {
  std::vector<std::unique_ptr<RedisServer>> servers;
  for (int i = 0; i < 2; ++i) servers.push_back(std::make_unique<RedisServer>());
  auto config = redlock_over(servers);
  config.redis.redlock.nodes = {{"127.0.0.1", servers[0]->port()},
                                {"localhost", servers[0]->port()},
                                {"127.0.0.1", servers[1]->port()}};
  servers[1]->kill();  // one real server left of two
  bool locked = false;
  try {
    auto service = dlock::make_lock_service(config);
    auto guard = service->try_lock("twice");
    locked = static_cast<bool>(guard);
  } catch (const dlock::Error& e) {
    WARN("refused: " << e.what());
  }
  CHECK_FALSE(locked);
}

