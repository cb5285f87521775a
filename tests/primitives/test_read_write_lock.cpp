// Read-write locks: many readers or one writer, a writer not starved by a
// stream of readers, re-entry, a read inside the thread's write (and the
// downgrade that follows), upgrades refused, fencing tokens for writers,
// a dead holder freed after its lease, and bad input.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "services.hpp"

using namespace std::chrono_literals;

TEST_CASE("readers share a read-write lock, a writer has it alone", "[rwlock]") {
  dlock::test::RedisServer redis;
  auto first = dlock::test::make_service(redis);
  auto second = dlock::test::make_service(redis);
  auto r1 = first->read_lock("prices");
  auto r2 = second->read_lock("prices");
  CHECK(r1);
  CHECK(r2);
  CHECK(r1.fencing_token() == 0);
  // From another thread: this one holds read locks, and a write lock inside them is refused (an upgrade).
  std::thread([&] {
    CHECK_FALSE(second->try_write_lock("prices"));
    CHECK_THROWS_AS(second->write_lock("prices", {.wait = 150ms}), dlock::LockTimeoutError);
  }).join();
  r1.unlock();
  r2.unlock();
  auto w = second->write_lock("prices");
  REQUIRE(w);
  CHECK(w.fencing_token() > 0);
  CHECK_FALSE(first->try_read_lock("prices"));
  CHECK_FALSE(first->try_write_lock("prices"));
  // The plain lock of the same key is another lock.
  CHECK(first->try_lock("prices"));
  w.unlock();
  CHECK(first->try_read_lock("prices"));
}

TEST_CASE("writers exclude everyone and readers never see a half-written value", "[rwlock]") {
  dlock::test::RedisServer redis;
  auto first = dlock::test::make_service(redis);
  auto second = dlock::test::make_service(redis);
  // Two values that a writer changes together; a reader must always see them equal.
  std::atomic<long> a{0}, b{0};
  std::atomic<int> writers_inside{0}, readers_inside{0}, torn{0}, overlaps{0}, writes{0}, reads{0};
  auto writer = [&](std::shared_ptr<dlock::RedisLockService> service) {
    for (int i = 0; i < 20; ++i) {
      auto w = service->write_lock("table", {.wait = 20s});
      if (writers_inside.fetch_add(1) > 0 || readers_inside.load() > 0) overlaps.fetch_add(1);
      a.fetch_add(1);
      std::this_thread::sleep_for(1ms);
      b.fetch_add(1);
      writers_inside.fetch_sub(1);
      writes.fetch_add(1);
    }
  };
  auto reader = [&](std::shared_ptr<dlock::RedisLockService> service) {
    for (int i = 0; i < 40; ++i) {
      auto r = service->read_lock("table", {.wait = 20s});
      readers_inside.fetch_add(1);
      if (writers_inside.load() > 0) overlaps.fetch_add(1);
      if (a.load() != b.load()) torn.fetch_add(1);
      readers_inside.fetch_sub(1);
      reads.fetch_add(1);
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(writer, first);
  threads.emplace_back(writer, second);
  for (int t = 0; t < 4; ++t) threads.emplace_back(reader, t % 2 ? first : second);
  for (auto& thread : threads) thread.join();
  CHECK(overlaps.load() == 0);
  CHECK(torn.load() == 0);
  CHECK(writes.load() == 40);
  CHECK(reads.load() == 160);
  CHECK(a.load() == 40);
}

TEST_CASE("a waiting writer is not starved by readers that keep coming", "[rwlock][fairness]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  std::atomic<bool> stop{false}, writer_got{false};
  // Readers overlap one another all the time: without fairness the lock is never free of readers.
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        auto r = service->try_read_lock("feed", {.wait = 5s});
        std::this_thread::sleep_for(20ms);
      }
    });
  }
  std::this_thread::sleep_for(100ms);
  std::thread writer([&] {
    auto w = other->write_lock("feed", {.wait = 5s});
    writer_got = bool(w);
  });
  writer.join();
  stop = true;
  for (auto& reader : readers) reader.join();
  CHECK(writer_got.load());
}

TEST_CASE("a read-write lock re-enters per mode, allows a read inside the thread's write, refuses an upgrade",
          "[rwlock][reentry]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  {
    auto r1 = service->read_lock("doc");
    auto r2 = service->read_lock("doc");  // re-entered
    CHECK(r2);
    CHECK_THROWS_WITH(service->write_lock("doc"), Catch::Contains("holds its read lock"));
    r2.unlock();
    CHECK(r1);
    CHECK_FALSE(other->try_write_lock("doc"));
  }
  auto w1 = service->write_lock("doc");
  const auto token = w1.fencing_token();
  auto w2 = service->write_lock("doc");  // re-entered: the same token
  CHECK(w2.fencing_token() == token);
  auto inner_read = service->read_lock("doc", {.wait = 0ms});  // a read inside this thread's write
  CHECK(inner_read);
  CHECK_FALSE(other->try_read_lock("doc"));
  w2.unlock();
  w1.unlock();
  // Downgraded: the read stays, so other readers may come in and writers may not.
  CHECK(other->try_read_lock("doc"));
  CHECK_FALSE(other->try_write_lock("doc"));
  inner_read.unlock();
  auto next = other->write_lock("doc");
  CHECK(next.fencing_token() > token);
}

TEST_CASE("a read-write lock held by a holder that stopped renewing frees after its lease", "[rwlock]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  auto r = service->read_lock("cache", {.lease = 500ms});
  r.detach();
  auto w = other->write_lock("cache", {.wait = 5s});
  CHECK(w);
  auto w2 = service->write_lock("cache2", {.lease = 500ms});
  w2.detach();
  auto r2 = other->read_lock("cache2", {.wait = 5s});
  CHECK(r2);
}

TEST_CASE("a read-write lock refuses bad input and foreign data with clear errors", "[rwlock][arguments]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  CHECK_THROWS_AS(service->read_lock(""), dlock::InvalidArgument);
  CHECK_THROWS_AS(service->write_lock("k", {.wait = -5ms}), dlock::InvalidArgument);
  CHECK_THROWS_AS(service->read_lock("k", {.lease = -1ms}), dlock::InvalidArgument);
  redis.run({"SET", "dlock:{busy}:rw:write", "x"});
  CHECK_THROWS_WITH(service->read_lock("busy"), Catch::Contains("not dlock's"));
  CHECK_THROWS_AS(service->write_lock("busy"), dlock::RedisError);
  CHECK(redis.run({"GET", "dlock:{busy}:rw:write"}) == "x");  // left as it was
}

TEST_CASE("WITH_DISTRIBUTED_READ_LOCK and WITH_DISTRIBUTED_WRITE_LOCK take the lock's forms", "[rwlock][macros]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  DISTRIBUTED_LOCK_SERVICE(service);
  int ran = 0;
  WITH_DISTRIBUTED_READ_LOCK("prices:{}", "eu") {
    CHECK(redis.run({"EXISTS", "dlock:{prices:eu}:rw:write"}) == "0");
    CHECK_FALSE(other->try_write_lock("prices:eu"));
    ++ran;
  }
  WITH_DISTRIBUTED_WRITE_LOCK_AS(guard, "prices:eu", {.wait = 1s}) {
    CHECK(guard.fencing_token() > 0);
    CHECK_FALSE(other->try_read_lock("prices:eu"));
    ++ran;
  }
  CHECK(ran == 2);
  // The block's release is on its way (not awaited): another service's try may reach Redis before it.
  CHECK(dlock::test::released(redis, {"EXISTS", "dlock:{prices:eu}:rw:write"}));
  CHECK(other->try_write_lock("prices:eu"));
}
