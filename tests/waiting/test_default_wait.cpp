// The shipped default: lock() and every form that blocks wait for a busy key
// (lock.wait_ms, 10 s) instead of trying once; try_lock still tries once.
// The suite's fixture services try once by default (tests/support/redis_server.cpp),
// so these cases build theirs from a fresh Config, as a user's service is.
#include <catch2/catch.hpp>

#include <mutex>
#include <thread>

#include "services.hpp"

using namespace std::chrono_literals;

namespace {

// A service with every lock setting at its shipped default, against the test server.
std::shared_ptr<dlock::RedisLockService> default_service(const dlock::test::RedisServer& redis) {
  dlock::Config config;
  config.redis = redis.config().redis;
  config.logging.level = "warn";
  return dlock::make_lock_service(config);
}

// Lets `guard` go 300 ms from now, on a thread of its own: long after a single
// try would have given up, long before the default wait ends.
std::thread release_soon(dlock::LockGuard& guard) {
  return std::thread([&guard] {
    std::this_thread::sleep_for(300ms);
    guard.unlock();
  });
}

}  // namespace

TEST_CASE("the shipped lock.wait_ms is a finite 10 s and try_lock still tries once", "[waiting][default-wait]") {
  CHECK(dlock::Config{}.lock.wait == 10s);
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiter = default_service(redis);
  auto guard = holder->lock("default:try");
  CHECK_FALSE(waiter->try_lock("default:try"));
  CHECK(waiter->stats().contended == 0);  // tried once: never joined the line
}

TEST_CASE("lock() and the block form wait for a busy key by default", "[waiting][default-wait]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiter = default_service(redis);

  auto first = holder->lock("default:plain");
  std::thread releasing = release_soon(first);
  CHECK(waiter->lock("default:plain"));
  releasing.join();

  auto second = holder->lock("default:block");
  releasing = release_soon(second);
  bool ran = false;
  {
    DISTRIBUTED_LOCK_SERVICE(waiter);
    WITH_DISTRIBUTED_LOCK("default:{}", "block") { ran = true; }
  }
  releasing.join();
  CHECK(ran);
  CHECK(waiter->stats().contended == 2);  // both waited in line
  CHECK(waiter->stats().timeouts == 0);
}

TEST_CASE("DistributedMutex under std::scoped_lock waits for a busy key by default", "[waiting][default-wait]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiter = default_service(redis);
  auto guard = holder->lock("default:mutex");
  std::thread releasing = release_soon(guard);
  dlock::DistributedMutex mutex(waiter, "default:mutex");
  {
    std::scoped_lock hold(mutex);
    CHECK(mutex.fencing_token() > guard.fencing_token());
  }
  releasing.join();
  CHECK(waiter->stats().contended == 1);
}

TEST_CASE("read and write locks lock_all and Semaphore::acquire wait by default", "[waiting][default-wait]") {
  dlock::test::RedisServer redis;
  auto holder = dlock::test::make_service(redis);
  auto waiter = default_service(redis);

  auto writer = holder->write_lock("default:rw");
  std::thread releasing = release_soon(writer);
  CHECK(waiter->read_lock("default:rw"));
  releasing.join();

  auto reader = holder->read_lock("default:rw2");
  releasing = release_soon(reader);
  CHECK(waiter->write_lock("default:rw2"));
  releasing.join();

  auto one_of_set = holder->lock("default:set-b");
  releasing = release_soon(one_of_set);
  auto both = waiter->lock_all({"default:set-a", "default:set-b"});
  CHECK(both);
  releasing.join();

  auto only_permit = holder->semaphore("default:permits", 1).acquire();
  releasing = release_soon(only_permit);
  CHECK(waiter->semaphore("default:permits").acquire());
  releasing.join();
}
