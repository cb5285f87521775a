// Multi-locks (lock_all, try_lock_all, WITH_DISTRIBUTED_LOCKS): every key of
// a set or none, no deadlock between overlapping sets given in any order,
// re-entry per key, a fencing token per key, release together from any
// thread, and bad sets refused before Redis is touched.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "services.hpp"

using namespace std::chrono_literals;

namespace {

bool exists(const dlock::test::RedisServer& redis, const std::string& key) {
  return redis.run({"EXISTS", "dlock:{" + key + "}"}) == "1";
}

// Released: each key's guard sends its release without waiting for the reply.
bool freed(const dlock::test::RedisServer& redis, const std::string& key) {
  return dlock::test::released(redis, {"EXISTS", "dlock:{" + key + "}"});
}

}  // namespace

TEST_CASE("lock_all takes every key, each with its own token, and releases them together", "[multi]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  std::vector<std::string> keys{"stock:3", "stock:1", "stock:2"};
  dlock::MultiLockGuard all = service->lock_all(keys);
  REQUIRE(all);
  CHECK(all.size() == 3);
  // Taken in sorted order, whatever order they were given in.
  CHECK(all.guards()[0].key() == "stock:1");
  CHECK(all.guards()[2].key() == "stock:3");
  std::set<std::uint64_t> tokens;
  for (const auto& key : keys) {
    CHECK(exists(redis, key));
    CHECK(service->hold_count(key) == 1);
    tokens.insert(all.fencing_token(key));
  }
  CHECK(tokens.size() == 3);
  CHECK_FALSE(tokens.contains(0));
  CHECK(all.remaining() > 0ms);
  CHECK_THROWS_AS(all.fencing_token("stock:9"), dlock::InvalidArgument);
  // Released from another thread, as a guard may be.
  std::thread([&] { all.unlock(); }).join();
  CHECK_FALSE(all);
  for (const auto& key : keys) CHECK_FALSE(exists(redis, key));
  all.unlock();  // idempotent
}

TEST_CASE("lock_all is all-or-nothing: a busy key releases the keys taken before it", "[multi]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  auto busy = holder->lock("c");
  auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(other->lock_all(std::vector<std::string>{"a", "b", "c", "d"}, {.wait = 300ms}),
                  dlock::LockTimeoutError);
  CHECK(dlock::test::elapsed_ms(start) >= 300);
  for (const char* key : {"a", "b", "d"}) CHECK(freed(redis, key));
  CHECK(other->watched_locks() == 0);
  // try_lock_all: once per key, an empty guard.
  dlock::MultiLockGuard none = other->try_lock_all(std::vector<std::string>{"a", "c"});
  CHECK_FALSE(none);
  CHECK(none.size() == 0);
  CHECK(freed(redis, "a"));
  busy.unlock();
  dlock::MultiLockGuard both = other->try_lock_all({"a", "c"});
  CHECK(both);
  CHECK(exists(redis, "a"));
  CHECK(exists(redis, "c"));
}

TEST_CASE("lock_all's message names the busy key and says none of the set is held", "[multi]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  auto busy = holder->lock("sku-2");
  try {
    other->lock_all({"sku-1", "sku-2"});
    FAIL("lock_all took a busy key");
  } catch (const dlock::LockTimeoutError& e) {
    const std::string what = e.what();
    CHECK(what.find("'sku-2'") != std::string::npos);
    CHECK(what.find("none of the set is held") != std::string::npos);
  }
  CHECK(freed(redis, "sku-1"));
}

TEST_CASE("lock_all refuses a bad set before touching Redis", "[multi][arguments]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  CHECK_THROWS_WITH(service->lock_all(std::vector<std::string>{}), Catch::Contains("set of keys is empty"));
  CHECK_THROWS_WITH(service->lock_all({"a", "b", "a"}), Catch::Contains("'a' is in the set twice"));
  CHECK_THROWS_AS(service->lock_all({"a", ""}), dlock::InvalidArgument);
  CHECK_THROWS_AS(service->lock_all({"a", "b"}, {.wait = -1ms}), dlock::InvalidArgument);
  CHECK_THROWS_AS(service->lock_all({"a", "b"}, {.lease = 0ms}), dlock::InvalidArgument);
  CHECK_FALSE(exists(redis, "a"));
  CHECK(redis.run({"KEYS", "dlock:{*"}).empty());  // only the service's registry entry is there
}

TEST_CASE("lock_all re-enters keys this thread holds, and keeps them when the set is released", "[multi][reentry]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto outer = service->lock("b");
  const std::uint64_t outer_token = outer.fencing_token();
  {
    auto all = service->lock_all({"a", "b"});
    REQUIRE(all);
    CHECK(service->hold_count("b") == 2);
    CHECK(all.fencing_token("b") == outer_token);  // a re-entry shares its acquisition's token
  }
  CHECK(service->hold_count("b") == 1);
  CHECK(service->hold_count("a") == 0);
  CHECK(exists(redis, "b"));
  CHECK(freed(redis, "a"));
  CHECK(outer);
}

TEST_CASE("callers locking overlapping sets in opposite orders never deadlock and never overlap", "[multi]") {
  dlock::test::RedisServer redis;
  auto first = dlock::test::make_service(redis);
  auto second = dlock::test::make_service(redis);
  const std::vector<std::string> catalogue{"k0", "k1", "k2", "k3", "k4"};
  std::map<std::string, int> inside;  // per key: holders inside now (guarded by `mutex`)
  std::mutex mutex;
  std::atomic<int> overlaps{0}, done{0};
  auto worker = [&](std::shared_ptr<dlock::RedisLockService> service, unsigned seed) {
    std::mt19937 random(seed);
    for (int i = 0; i < 25; ++i) {
      std::vector<std::string> set = catalogue;
      std::shuffle(set.begin(), set.end(), random);
      set.resize(1 + random() % 3);
      auto all = service->lock_all(set, {.wait = 20s});
      {
        std::lock_guard guard(mutex);
        for (const auto& key : set) {
          if (++inside[key] > 1) overlaps.fetch_add(1);
        }
      }
      std::this_thread::sleep_for(1ms);
      {
        std::lock_guard guard(mutex);
        for (const auto& key : set) --inside[key];
      }
      done.fetch_add(1);
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) threads.emplace_back(worker, t % 2 ? first : second, t + 1);
  for (auto& thread : threads) thread.join();
  CHECK(overlaps.load() == 0);
  CHECK(done.load() == 100);
  CHECK(dlock::test::eventually([&] { return redis.run({"KEYS", "dlock:{k*}"}).empty(); }, 500ms));
}

TEST_CASE("a multi-lock's stop token and lost() follow any one of its locks", "[multi][watchdog]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.lock.watchdog_timeout = 900ms;
    c.logging.level = "off";
  });
  auto all = service->lock_all({"x", "y"});
  REQUIRE(all);
  CHECK_FALSE(all.stop_token().stop_requested());
  redis.run({"DEL", "dlock:{y}"});
  CHECK(dlock::test::eventually([&] { return all.stop_token().stop_requested(); }, 3000ms));
  CHECK(all.lost());
  CHECK_FALSE(all);
  CHECK_THROWS_WITH(all.check(), Catch::Contains("'y'"));
  CHECK_THROWS_AS(all.unlock(), dlock::LockLostError);
  CHECK_FALSE(exists(redis, "x"));  // the other lock was still released
}

TEST_CASE("WITH_DISTRIBUTED_LOCKS takes a range, a template and values, or a braced list", "[multi][macros]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  DISTRIBUTED_LOCK_SERVICE(service);
  std::vector<int> skus{7, 3};
  int ran = 0;
  WITH_DISTRIBUTED_LOCKS("stock:{}", skus) {
    CHECK(service->hold_count("stock:7") == 1);
    CHECK(service->hold_count("stock:3") == 1);
    ++ran;
  }
  CHECK(freed(redis, "stock:7"));
  WITH_DISTRIBUTED_LOCKS_AS(locks, std::vector<std::string>{"p", "q"}, {.lease = 5s}) {
    CHECK(locks.size() == 2);
    CHECK(locks.fencing_token("q") > 0);
    ++ran;
  }
  WITH_DISTRIBUTED_LOCKS({"p", "q"}) { ++ran; }
  auto other = dlock::test::make_service(redis);
  auto busy = other->lock("q");
  bool skipped = false;
  WITH_DISTRIBUTED_LOCKS_IF_FREE({"p", "q"}) { ++ran; }
  else {
    skipped = true;
  }
  CHECK(skipped);
  CHECK(ran == 3);
  CHECK(freed(redis, "p"));
}
