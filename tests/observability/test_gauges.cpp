// The gauges of stats() and prometheus_text: what a service holds and waits
// for now, and their breakdown by key prefix within its bound (lock.metrics).
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

#include <asio/use_future.hpp>

#include "dlock/asio.hpp"
#include "dlock/prometheus_text.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

const dlock::KeyPrefixGauges& series(const dlock::LockStats& stats, const std::string& prefix) {
  for (const auto& one : stats.by_key_prefix) {
    if (one.key_prefix == prefix) return one;
  }
  FAIL("no series key_prefix=\"" << prefix << "\"");
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("held_locks counts the keys held now and falls to 0 when they are released", "[stats][metrics][gauges]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  CHECK(service->stats().held == 0);
  {
    auto first = service->lock("order:1");
    auto second = service->lock("order:2");
    auto third = service->lock("stock:9");
    auto again = service->lock("order:1");  // a re-entry is the same key and owner: no new lock held
    CHECK(service->stats().held == 3);
    auto permit = service->semaphore("payments", 2).acquire(1, {.wait = 5s});
    auto both = service->lock_all({"a", "b"}, {.wait = 5s});
    CHECK(service->stats().held == 6);
    CHECK_THAT(dlock::prometheus_text(service->stats(), {{"service", "shop"}}),
               Contains("# TYPE dlock_held_locks gauge\ndlock_held_locks{service=\"shop\"} 6\n"));
    CHECK_THAT(dlock::format_stats(service->stats()), Contains("held=6 waiting=0"));
  }
  CHECK(service->stats().held == 0);
  CHECK_THAT(dlock::prometheus_text(service->stats()), Contains("\ndlock_held_locks 0\n"));
}

TEST_CASE("a lock whose fixed lease ran out no longer counts as held though its guard lives",
          "[stats][metrics][gauges]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto guard = service->lock("k", {.lease = 300ms});
  CHECK(service->stats().held == 1);
  CHECK(dlock::test::eventually([&] { return service->stats().held == 0; }));
}

TEST_CASE("waiting_calls counts blocking and async callers waiting now and falls to 0 when they are served",
          "[stats][metrics][gauges]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);
  auto guard = holder->lock("job:1");
  CHECK(service->stats().waiting == 0);

  std::atomic<int> served{0};
  std::thread blocking([&] {
    auto mine = service->lock("job:1", {.wait = 30s});
    ++served;
  });
  std::future<dlock::LockGuard> async = dlock::async_lock(*service, "job:1", {.wait = 30s}, asio::use_future);
  REQUIRE(dlock::test::eventually([&] { return service->stats().waiting == 2; }));
  CHECK_THAT(dlock::prometheus_text(service->stats()),
             Contains("# TYPE dlock_waiting_calls gauge\ndlock_waiting_calls 2\n"));
  CHECK(holder->stats().waiting == 0);  // the holder's own service waits for nothing

  guard.unlock();
  // The two take the lock in turn; each stops counting when it gets it.
  async.get().unlock();
  blocking.join();
  CHECK(served == 1);
  CHECK(service->stats().waiting == 0);
}

TEST_CASE("a caller that gives up stops counting as waiting", "[stats][metrics][gauges]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);
  auto guard = holder->lock("k");
  CHECK_FALSE(service->try_lock("k", {.wait = 200ms}));
  CHECK(service->stats().timeouts == 1);
  CHECK(service->stats().waiting == 0);
}

TEST_CASE("gauges by key prefix: listed prefixes and separator prefixes up to the bound then other",
          "[stats][metrics][gauges]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.lock.metrics.key_prefixes = {"order:", "order:vip:"};
    c.lock.metrics.key_prefix_separator = ":";
    c.lock.metrics.max_key_prefixes = 4;
  });
  std::vector<dlock::LockGuard> guards;
  for (const char* key : {"order:1", "order:2", "order:vip:3", "stock:1", "stock:2", "user:1"}) {
    guards.push_back(service->lock(key));
  }
  // Room for two separator prefixes beside the two listed: stock: and user: take it.
  for (int i = 0; i < 50; ++i) guards.push_back(service->lock("cart" + std::to_string(i) + ":x"));
  guards.push_back(service->lock("no-separator"));

  const dlock::LockStats stats = service->stats();
  CHECK(stats.held == 57);
  REQUIRE(stats.by_key_prefix.size() == 5);  // the bound (4) plus other, however many keys
  CHECK(series(stats, "order:").held == 2);
  CHECK(series(stats, "order:vip:").held == 1);  // the longest listed prefix wins
  CHECK(series(stats, "stock:").held == 2);
  CHECK(series(stats, "user:").held == 1);
  CHECK(series(stats, "other").held == 51);
  CHECK(stats.by_key_prefix.back().key_prefix == "other");

  const std::string text = dlock::prometheus_text(stats, {{"service", "shop"}});
  CHECK_THAT(text, Contains("dlock_held_locks{service=\"shop\",key_prefix=\"order:\"} 2\n"));
  CHECK_THAT(text, Contains("dlock_held_locks{service=\"shop\",key_prefix=\"other\"} 51\n"));
  CHECK_THAT(text, Contains("dlock_waiting_calls{service=\"shop\",key_prefix=\"stock:\"} 0\n"));
  CHECK_THAT(text, !Contains("dlock_held_locks{service=\"shop\"} "));  // no whole beside its parts

  // Released, the series stay at 0: a dashboard's lines do not come and go.
  guards.clear();
  const dlock::LockStats idle = service->stats();
  CHECK(idle.by_key_prefix.size() == 5);
  CHECK(series(idle, "user:").held == 0);
  CHECK(series(idle, "other").held == 0);
}

TEST_CASE("waiting calls are broken down by key prefix too", "[stats][metrics][gauges]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.metrics.key_prefixes = {"job:"}; });
  auto first = holder->lock("job:1");
  auto second = holder->lock("mail:1");
  std::future<dlock::LockGuard> job = dlock::async_lock(*service, "job:1", {.wait = 30s}, asio::use_future);
  std::future<dlock::LockGuard> mail = dlock::async_lock(*service, "mail:1", {.wait = 30s}, asio::use_future);
  REQUIRE(dlock::test::eventually([&] { return service->stats().waiting == 2; }));
  const dlock::LockStats stats = service->stats();
  CHECK(series(stats, "job:").waiting == 1);
  CHECK(series(stats, "other").waiting == 1);
  first.unlock();
  second.unlock();
  job.get().unlock();
  mail.get().unlock();
  CHECK(service->stats().waiting == 0);
}

TEST_CASE("a breakdown that cannot keep its bound and the key_prefix label name are refused", "[stats][metrics]") {
  dlock::test::RedisServer redis;
  CHECK_THROWS_AS(dlock::test::make_service(redis,
                                            [](dlock::Config& c) {
                                              c.lock.metrics.key_prefixes = {"a:", "b:", "c:"};
                                              c.lock.metrics.max_key_prefixes = 2;
                                            }),
                  dlock::InvalidArgument);
  CHECK_THROWS_AS(
      dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.metrics.key_prefixes = {"other"}; }),
      dlock::InvalidArgument);
  CHECK_THROWS_AS(dlock::prometheus_text(dlock::LockStats{}, {{"key_prefix", "x"}}), dlock::InvalidArgument);
}

// Fresh-eyes review: a prefix the separator finds may be spelled "other"; it is
// the fold's series then, not a second series of that name (a scrape with a
// duplicate sample is refused by Prometheus).
TEST_CASE("a found key prefix never duplicates the other series", "[observability][gauges]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.metrics.key_prefix_separator = "er"; });
  auto held = service->lock("other-job");  // "oth" + "er": the prefix found is "other"
  const dlock::LockStats stats = service->stats();
  int others = 0;
  for (const auto& series : stats.by_key_prefix) others += series.key_prefix == "other";
  CHECK(others == 1);
  const std::string text = dlock::prometheus_text(stats);
  const std::string sample = "dlock_held_locks{key_prefix=\"other\"}";
  const auto first = text.find(sample);
  REQUIRE(first != std::string::npos);
  CHECK(text.find(sample, first + 1) == std::string::npos);
}
