// Redis Cluster mode: locks over many slots, a slot migrated and a master
// failed over under load, and a wrong seed list at start-up. One throwaway
// cluster (3 masters, 1 replica each) serves the whole file; the cases run in
// order, the destructive one (failover) last.
#include <spdlog/sinks/ostream_sink.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <functional>
#include <future>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "deployment_yaml.hpp"
#include "redis_cluster.hpp"
#include "shared_cluster.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Catch::Matchers::Contains;

using dlock::test::cluster;
using dlock::test::cluster_service;
using dlock::test::slot_of;

namespace {

std::string id_of(int port) { return cluster().node(port).run({"CLUSTER", "MYID"}); }

// Moves every key `slot` has on `from` to `to` (the slot is migrating).
void move_keys(std::uint16_t slot, int from, int to) {
  const std::string s = std::to_string(slot);
  const std::string keys = cluster().node(from).run({"CLUSTER", "GETKEYSINSLOT", s, "100"});
  std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(to), "", "0", "5000", "KEYS"};
  std::size_t start = 0;
  while (start < keys.size()) {
    std::size_t space = keys.find(' ', start);
    if (space == std::string::npos) space = keys.size();
    if (space > start) migrate.push_back(keys.substr(start, space - start));
    start = space + 1;
  }
  if (migrate.size() > 7) REQUIRE(cluster().node(from).run(migrate) == "OK");
}

// Opens the migration of `slot` from `from` to `to` and, if asked, moves every key it has now.
void start_migration(std::uint16_t slot, int from, int to, bool keys_too = true) {
  const std::string s = std::to_string(slot);
  REQUIRE(cluster().node(to).run({"CLUSTER", "SETSLOT", s, "IMPORTING", id_of(from)}) == "OK");
  REQUIRE(cluster().node(from).run({"CLUSTER", "SETSLOT", s, "MIGRATING", id_of(to)}) == "OK");
  if (keys_too) move_keys(slot, from, to);
}

void finish_migration(std::uint16_t slot, int from, int to) {
  const std::string s = std::to_string(slot);
  const std::string target = id_of(to);
  cluster().node(to).run({"CLUSTER", "SETSLOT", s, "NODE", target});
  cluster().node(from).run({"CLUSTER", "SETSLOT", s, "NODE", target});
  for (int port : cluster().master_ports()) {
    if (port != to && port != from) cluster().node(port).run({"CLUSTER", "SETSLOT", s, "NODE", target});
  }
}

int other_master(int from) {
  for (int port : cluster().master_ports()) {
    if (port != from) return port;
  }
  return 0;
}

// Unlocks `guard` while a migration of its slot goes on for `migrating`,
// then `finish`es it: the unlock throws nothing, and the lock is free after.
void check_unlock_while_migrating(dlock::LockGuard& guard, const std::string& key, dlock::Millis migrating,
                                  const std::function<void()>& finish) {
  auto finisher = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(migrating);
    finish();
  });
  const auto began = Clock::now();
  std::string failure;
  try {
    guard.unlock();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count();
  finisher.get();
  INFO("took " << took << " ms; failure: " << failure);
  CHECK(failure.empty());
  // Whatever the unlock said, the lock must be free once the migration is over.
  auto other = dlock::make_lock_service(cluster().config());
  CHECK(other->try_lock(key, {.wait = 2s}));
  cluster().wait_healthy();
}

}  // namespace

TEST_CASE("a command goes by the hash slot of its key's hash tag", "[cluster]") {
  dlock::Config config;
  config.redis.mode = dlock::RedisMode::cluster;
  dlock::ClusterExecutor executor(config.redis);  // dials nothing
  CHECK(executor.script_group("123456789") == 12739);
  CHECK(executor.script_group("{user1000}.following") == executor.script_group("{user1000}.followers"));
  CHECK(executor.script_group("dlock:{K}") == executor.script_group("dlock:{K}:queue"));
  CHECK(executor.script_group("foo{}{bar}") != executor.script_group("bar"));
  CHECK(executor.script_group("a{b}c") == executor.script_group("b"));
}

TEST_CASE("the test cluster describes every node's state and slot map, for a failed wait to show", "[cluster]") {
  const std::string described = cluster().describe();
  INFO(described);
  for (int port : cluster().master_ports()) {
    CHECK_THAT(described, Contains("node " + std::to_string(port) + ": cluster_state:ok, slots 0-"));
    CHECK_THAT(described, Contains("@" + std::to_string(port)));
  }
  CHECK_THAT(described, Contains("myself,master"));
}

TEST_CASE("a bad seed list fails at start-up with a clear ConnectionError", "[cluster]") {
  dlock::Config config;
  config.redis.mode = dlock::RedisMode::cluster;
  config.redis.connect_timeout = 300ms;
  config.redis.cluster.nodes = {{"127.0.0.1", dlock::test::free_loopback_port()},
                                {"127.0.0.1", dlock::test::free_loopback_port()}};
  CHECK_THROWS_WITH(dlock::make_lock_service(config),
                    Catch::Contains("no seed in redis.cluster.nodes told the slot map") &&
                        Catch::Contains("connection refused"));
  dlock::test::RedisServer standalone;  // not started with cluster-enabled
  config.redis.cluster.nodes = {{"127.0.0.1", standalone.port()}};
  CHECK_THROWS_AS(dlock::make_lock_service(config), dlock::ConnectionError);
  CHECK_THROWS_WITH(dlock::make_lock_service(config), Catch::Contains("cluster-enabled yes"));
}

TEST_CASE("locks over many slots: re-entry, waiting with notices, renewals across slots, list", "[cluster]") {
  auto holder = cluster_service(600ms);  // renewed every 200 ms
  auto waiter = cluster_service();
  std::vector<dlock::LockGuard> guards;
  std::set<std::uint16_t> slots;
  for (int i = 0; i < 60; ++i) {
    guards.push_back(holder->lock("many:" + std::to_string(i)));
    slots.insert(slot_of("many:" + std::to_string(i)));
  }
  REQUIRE(slots.size() > 50);
  {
    auto inner = holder->lock("many:0");
    CHECK(holder->hold_count("many:0") == 2);
  }
  CHECK(holder->hold_count("many:0") == 1);

  std::this_thread::sleep_for(1500ms);  // 2.5 leases: only renewals keep them
  for (const auto& guard : guards) CHECK(guard);

  auto waiting = std::async(std::launch::async, [&] { return waiter->lock("many:7", {.wait = 10s}).fencing_token(); });
  std::this_thread::sleep_for(300ms);
  const auto released = Clock::now();
  const std::uint64_t token = guards[7].fencing_token();
  guards[7].unlock();
  REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
  CHECK(waiting.get() == token + 1);
  CHECK(Clock::now() - released < 1000ms);

  // Every master's share of the locks is found.
  auto executor = dlock::make_executor(cluster().config().redis);
  std::size_t found = 0, masters = 0;
  executor->for_each_master([&](dlock::RedisExecutor& master) {
    ++masters;
    std::string cursor = "0";
    do {
      const auto reply = master.command({"SCAN", cursor, "MATCH", "dlock:{many:*}", "COUNT", "1000", "TYPE", "hash"});
      cursor = reply.elements.at(0).str;
      found += reply.elements.at(1).elements.size();
    } while (cursor != "0");
  });
  CHECK(masters == 3);
  CHECK(found == 59);
}

TEST_CASE("a multi-lock over keys on every master: all or nothing, released together", "[cluster][multi]") {
  auto first = cluster_service();
  auto second = cluster_service();
  std::vector<std::string> keys;
  std::set<int> masters;
  for (int i = 0; masters.size() < 3 || keys.size() < 6; ++i) {
    keys.push_back("multi:" + std::to_string(i));
    masters.insert(cluster().master_port(slot_of(keys.back())));
  }
  auto all = first->lock_all(keys);
  REQUIRE(all);
  CHECK(all.size() == keys.size());
  // A set sharing one key with it is not had, and leaves none of its own keys held.
  auto blocked = second->try_lock_all(std::vector<std::string>{"multi:free", keys.back()}, {.wait = 200ms});
  CHECK_FALSE(blocked);
  CHECK(second->try_lock("multi:free"));
  all.unlock();
  for (const auto& key : keys) CHECK(second->try_lock(key));
}

TEST_CASE("read-write locks and semaphores on a cluster: each on the master of its name's slot", "[cluster]") {
  auto first = cluster_service(600ms);
  auto second = cluster_service();
  auto reader = first->read_lock("rw:cluster");
  CHECK(second->try_read_lock("rw:cluster"));
  CHECK_FALSE(second->try_write_lock("rw:cluster"));
  auto permits = first->semaphore("sem:cluster", 2).acquire(2);
  std::this_thread::sleep_for(1500ms);  // 2.5 leases: only renewals keep them
  CHECK(reader);
  CHECK(permits);
  CHECK_FALSE(second->semaphore("sem:cluster").try_acquire());
  auto waiting = std::async(std::launch::async, [&] { return bool(second->write_lock("rw:cluster", {.wait = 10s})); });
  std::this_thread::sleep_for(200ms);
  reader.unlock();
  REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
  CHECK(waiting.get());
  permits.unlock();
  CHECK(second->semaphore("sem:cluster").available() == 2);
  const int master = cluster().master_port(slot_of("sem:cluster"));
  CHECK(cluster().node(master).run({"GET", "dlock:{sem:cluster}:semaphore"}) == "2");
}

TEST_CASE("a pipeline over several masters comes back in order; a WAIT goes with the write before it", "[cluster]") {
  auto executor = dlock::make_executor(cluster().config().redis);
  std::vector<dlock::RedisCommand> commands;
  for (int i = 0; i < 20; ++i) {
    commands.push_back({"SET", "pipe:" + std::to_string(i), std::to_string(i)});
    commands.push_back({"WAIT", "0", "0"});  // answered at once, by the master of the SET before it
  }
  commands.push_back({"GET", "pipe:7"});
  const auto replies = executor->pipeline(commands);
  REQUIRE(replies.size() == commands.size());
  for (int i = 0; i < 20; ++i) {
    CHECK(replies[2 * i].str == "OK");
    CHECK(replies[2 * i + 1].type == dlock::RedisReply::Type::Integer);
  }
  CHECK(replies.back().str == "7");
  CHECK_THROWS_AS(executor->pipeline({{"GET", "pipe:1"}, {}}), dlock::InvalidArgument);
  CHECK_THROWS_AS(executor->command({}), dlock::InvalidArgument);
}

TEST_CASE("review: a pipeline that opens with a keyless command follows ASK to a key being imported", "[cluster]") {
  // ASKING holds for the one command after it: a PING between it and the
  // keyed command used the flag up, and the importing node sent a MOVED back.
  const std::string key = "{ask-leading}:absent";
  const std::uint16_t slot = slot_of("ask-leading");
  const int from = cluster().master_port(slot);
  int to = 0;
  for (int port : cluster().master_ports()) {
    if (port != from) to = port;
  }
  auto executor = dlock::make_executor(cluster().config().redis);
  std::vector<dlock::RedisReply> replies;
  std::string failure;
  cluster().migrate_slot(slot, to, [&] {
    try {
      replies = executor->pipeline({{"PING"}, {"GET", key}});  // absent on the source: ASK
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  cluster().migrate_slot(slot, from);
  INFO(failure);
  REQUIRE(failure.empty());
  REQUIRE(replies.size() == 2);
  CHECK(replies[0].str == "PONG");
  CHECK(replies[1].type == dlock::RedisReply::Type::Nil);
}

TEST_CASE("a slot migrated while its lock is held and waited for: no double holder, no error", "[cluster]") {
  const std::string key = "migrating";
  const std::uint16_t slot = slot_of(key);
  const int from = cluster().master_port(slot);
  int to = 0;
  for (int port : cluster().master_ports()) {
    if (port != from) to = port;
  }
  std::vector<std::shared_ptr<dlock::RedisLockService>> services{cluster_service(), cluster_service()};
  std::atomic<long long> counter{0};
  std::atomic<bool> done{false};
  std::atomic<int> errors{0};
  std::string first_error;
  std::mutex error_mutex;
  std::atomic<long long> increments{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      while (!done.load()) {
        try {
          auto guard = services[t % 2]->lock(key, {.wait = 20s});
          const long long seen = counter.load();  // not atomic as a whole: only the lock keeps it exact
          std::this_thread::sleep_for(2ms);
          counter.store(seen + 1);
          ++increments;
        } catch (const std::exception& e) {
          ++errors;
          std::lock_guard guard(error_mutex);
          if (first_error.empty()) first_error = e.what();
        }
      }
    });
  }
  std::this_thread::sleep_for(300ms);
  cluster().migrate_slot(slot, to, [] { std::this_thread::sleep_for(150ms); });
  std::this_thread::sleep_for(300ms);
  cluster().migrate_slot(slot, from);  // and back, while they go on
  std::this_thread::sleep_for(300ms);
  done = true;
  for (auto& worker : workers) worker.join();
  INFO(first_error);
  CHECK(errors.load() == 0);
  CHECK(increments.load() > 20);
  CHECK(counter.load() == increments.load());
  CHECK(cluster().master_port(slot) == from);
}

TEST_CASE("review: ASK then TRYAGAIN during a migration is waited out within the command timeout", "[cluster]") {
  const std::string tag = "{rv-ask}";
  const std::uint16_t slot = slot_of(tag.substr(1, tag.size() - 2));
  const int from = cluster().master_port(slot);
  const int to = other_master(from);
  dlock::Config config = cluster().config();
  config.redis.command_timeout = 4000ms;
  auto executor = dlock::make_executor(config.redis);
  REQUIRE(executor->command({"SET", tag + "a", "1"}).str == "OK");

  start_migration(slot, from, to);  // {rv-ask}a now lives on `to`; {rv-ask}b exists nowhere
  // The migration ends 1 s from now: well within the 4 s command timeout.
  auto finisher = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(1000ms);
    finish_migration(slot, from, to);
  });
  const auto began = Clock::now();
  std::string failure;
  dlock::RedisReply reply;
  try {
    reply = executor->command({"EVAL", "return redis.call('GET', KEYS[1])", "2", tag + "a", tag + "b"});
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count();
  finisher.get();
  INFO("took " << took << " ms; failure: " << failure);
  CHECK(failure.empty());
  CHECK(reply.str == "1");
  cluster().wait_healthy();
}

TEST_CASE("review: a holder's unlock while its slot migrates (keys already moved) succeeds within the command timeout",
          "[cluster]") {
  const std::string key = "rv-unlock";
  const std::uint16_t slot = slot_of(key);
  const int from = cluster().master_port(slot);
  const int to = other_master(from);
  dlock::Config config = cluster().config();
  config.redis.command_timeout = 4000ms;
  auto service = dlock::make_lock_service(config);
  auto guard = service->lock(key);
  REQUIRE(guard);

  start_migration(slot, from, to);  // the lock and its fencing counter move; queue, alive, turn do not exist
  check_unlock_while_migrating(guard, key, 1000ms, [&] { finish_migration(slot, from, to); });
}

TEST_CASE("review: a lock whose slot is marked migrating, none of its keys moved, can be released", "[cluster]") {
  // The source answers TRYAGAIN to any script naming a key it lacks while
  // the slot is MIGRATING; queue, alive and turn of an uncontended lock never
  // exist, so every script of every lock in the slot is refused for the whole
  // migration: a release must wait that out, not give up after the command
  // timeout and leave the lock held for its whole lease.
  const std::string key = "rv-none-moved";
  const std::uint16_t slot = slot_of(key);
  const int from = cluster().master_port(slot);
  const int to = other_master(from);
  dlock::Config config = cluster().config();  // command timeout 1000 ms
  auto service = dlock::make_lock_service(config);
  auto guard = service->lock(key);
  REQUIRE(guard);
  start_migration(slot, from, to, /*keys_too=*/false);
  // A migration of a slot with many keys takes a while; this one 1.5 s.
  check_unlock_while_migrating(guard, key, 1500ms, [&] {
    move_keys(slot, from, to);
    finish_migration(slot, from, to);
  });
}

TEST_CASE("review: an evicting master of a cluster is named at start-up, whichever master it is", "[cluster]") {
  const std::vector<int> masters = cluster().master_ports();
  REQUIRE(masters.size() == 3);
  int warned = 0;
  for (const int evicting : masters) {
    for (const int port : masters) {
      cluster().node(port).run({"CONFIG", "SET", "maxmemory", "100mb"});
      cluster().node(port).run({"CONFIG", "SET", "maxmemory-policy", port == evicting ? "allkeys-lru" : "noeviction"});
    }
    std::ostringstream out;
    auto logger = std::make_shared<spdlog::logger>("review", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
    auto service = dlock::make_lock_service(cluster().config(), logger);
    const bool named = out.str().find("127.0.0.1:" + std::to_string(evicting) + " has maxmemory") != std::string::npos;
    UNSCOPED_INFO("master on port " << evicting << " evicting: " << (named ? "warned" : "NOT warned"));
    if (named) ++warned;
  }
  for (const int port : masters) {
    cluster().node(port).run({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
    cluster().node(port).run({"CONFIG", "SET", "maxmemory", "0"});
  }
  CHECK(warned == 3);
}

TEST_CASE("review: a key or prefix that would break a lock's hash tag is refused before anything is sent", "[cluster]") {
  // "P{}x}" has an empty hash tag: the cluster would hash each of the lock's names whole, into different slots.
  auto service = cluster_service();
  CHECK_THROWS_WITH(service->try_lock("}weird"), Contains("lock '}weird': key begins with '}'"));
  CHECK(cluster().node(cluster().master_port(slot_of("}weird"))).run({"EXISTS", "dlock:{}weird}"}) == "0");
  CHECK_NOTHROW(service->try_lock("we}ird"));  // the tag is "we": every name of the lock still shares it
  dlock::Config config = cluster().config();
  config.lock.key_prefix = "app{}:";
  CHECK_THROWS_WITH(dlock::make_lock_service(config), Contains("lock.key_prefix 'app{}:' holds a brace"));
}

#ifdef FLASH_SALE_BIN  // the examples are built
TEST_CASE("flash_sale and the dlock command work unchanged on the cluster, from a YAML file", "[cluster]") {
  const dlock::test::TempDir files;
  const std::string yaml = files.write("cluster.yaml", dlock::test::deployment_yaml(cluster().config().redis));
  dlock::test::check_examples_and_cli(yaml, "CLUSTER");
  // The stock key lives in the cluster, on the master of its slot.
  CHECK(cluster().node(cluster().master_port(slot_of("stock:CLUSTER"))).run({"GET", "stock:CLUSTER"}) == "0");
}
#endif

TEST_CASE("a master failed over: holders are told when the lock is gone, others go on, waiters get it", "[cluster]") {
  // A lease shorter than a failover (node timeout 2 s, then the election):
  // the holders on the dead master cannot renew in time and are told.
  auto service = cluster_service(900ms);
  std::mutex lost_mutex;
  std::set<std::string> lost;
  service->on_lost([&](const std::string& key) {
    std::lock_guard guard(lost_mutex);
    lost.insert(key);
  });
  const std::string doomed = "doomed";
  const int dead_port = cluster().master_port(slot_of(doomed));
  std::string safe;
  for (int i = 0; safe.empty(); ++i) {
    if (cluster().master_port(slot_of("safe:" + std::to_string(i))) != dead_port) safe = "safe:" + std::to_string(i);
  }
  auto doomed_guard = service->lock(doomed);
  auto safe_guard = service->lock(safe);
  auto waiter = cluster_service();
  auto waiting = std::async(std::launch::async, [&] { return static_cast<bool>(waiter->lock(doomed, {.wait = 20s})); });
  std::this_thread::sleep_for(300ms);

  cluster().node(dead_port).kill();
  CHECK(dlock::test::eventually([&] { return doomed_guard.lost(); }, 5s));
  CHECK(doomed_guard.stop_token().stop_requested());
  REQUIRE_NOTHROW(cluster().wait_healthy());
  REQUIRE(waiting.wait_for(20s) == std::future_status::ready);
  CHECK(waiting.get());
  std::this_thread::sleep_for(1000ms);  // more renewals of the lock on a master that lived
  CHECK(safe_guard);
  {
    std::lock_guard guard(lost_mutex);
    CHECK(lost == std::set<std::string>{doomed});
  }

  // A planned failover (CLUSTER FAILOVER on a replica) keeps what was replicated: the holder goes on.
  const int planned = cluster().master_port(slot_of(safe));
  const int replica = cluster().replica_port(planned);
  CHECK(cluster().node(replica).run({"CLUSTER", "FAILOVER"}) == "OK");
  CHECK(dlock::test::eventually([&] { return cluster().master_port(slot_of(safe)) == replica; }, 10s));
  std::this_thread::sleep_for(1000ms);
  CHECK(safe_guard);
  CHECK_NOTHROW(safe_guard.unlock());
  CHECK(service->lock(doomed, {.wait = 5s}));
}
