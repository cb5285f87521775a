// The async API end to end on every deployment (one case each): TLS,
// Sentinel, Redis Cluster and Redlock. Coroutines on one io_context thread
// take a lock in turn through async_lock and exclude each other; a set
// spans keys (and, in a cluster, slots); nothing stays held.
#include <catch2/catch.hpp>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <string>

#include "dlock/asio.hpp"
#include "redis_cluster.hpp"
#include "redlock_nodes.hpp"
#include "sentinel_topology.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

namespace {

struct Sections {
  int inside = 0;  // one io thread: no atomics needed
  int overlaps = 0;
  int done = 0;
};

asio::awaitable<void> take_in_turn(dlock::RedisLockService& service, std::string key, Sections& sections) {
  asio::steady_timer work(co_await asio::this_coro::executor);
  for (int round = 0; round < 3; ++round) {
    dlock::LockGuard guard = co_await dlock::async_lock(service, key, {.wait = 30s}, asio::use_awaitable);
    if (sections.inside++ != 0) ++sections.overlaps;
    work.expires_after(2ms);
    co_await work.async_wait(asio::use_awaitable);
    --sections.inside;
    co_await dlock::async_unlock(std::move(guard), asio::use_awaitable);
    ++sections.done;
  }
}

// 8 coroutines on one thread, 3 rounds each, on one key; then a set of three keys.
void exercise(dlock::RedisLockService& service, const std::string& key) {
  asio::io_context io;
  Sections sections;
  for (int i = 0; i < 8; ++i) asio::co_spawn(io, take_in_turn(service, key, sections), asio::detached);
  io.run();
  CHECK(sections.done == 24);
  CHECK(sections.overlaps == 0);
  dlock::MultiLockGuard set =
      dlock::async_lock_all(service, {key + ":a", key + ":b", key + ":c"}, {}, asio::use_future).get();
  CHECK(set.size() == 3);
  CHECK_FALSE(dlock::async_try_lock(service, key + ":b", {}, asio::use_future).get());
  CHECK_NOTHROW(set.unlock());
  CHECK(dlock::async_try_lock(service, key + ":b", {}, asio::use_future).get());
}

}  // namespace

TEST_CASE("async over TLS: coroutines take a lock in turn", "[async][tls]") {
  dlock::test::RedisServer redis({}, dlock::test::ServerTls{});
  auto service = dlock::test::make_service(redis);
  exercise(*service, "tls:async");
  CHECK(redis.run({"EXISTS", "dlock:{tls:async}", "dlock:{tls:async:a}"}) == "0");
}

TEST_CASE("async over Sentinel: coroutines take a lock in turn", "[async][sentinel]") {
  dlock::test::SentinelTopology::Options options;
  options.replicas = 0;
  options.sentinels = 1;
  dlock::test::SentinelTopology deployment(options);
  auto service = dlock::make_lock_service(deployment.config());
  exercise(*service, "sentinel:async");
}

TEST_CASE("async over a Redis Cluster: coroutines take a lock in turn and a set spans slots", "[async][cluster]") {
  dlock::test::RedisCluster cluster(3, 0);
  auto service = dlock::make_lock_service(cluster.config());
  exercise(*service, "cluster:async");
}

TEST_CASE("async over a Redlock: coroutines take a lock in turn", "[async][redlock]") {
  dlock::test::RedlockNodes nodes;
  auto service = dlock::make_lock_service(nodes.config());
  exercise(*service, "redlock:async");
  for (const std::string& reply : nodes.run_everywhere({"EXISTS", "dlock:{redlock:async}"})) CHECK(reply == "0");
}
