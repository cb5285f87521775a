// The read-write lock, the semaphore and the multi-lock keep the lock's rules:
// the same schedule (a detach, a lost reply, a counter gone, a release through
// a stall, replica acknowledgements withheld) gives the same outcome class
// whichever primitive it runs against. Each primitive is one row of a table.
#include <catch2/catch.hpp>

#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fault_tools.hpp"
#include "replicated_pair.hpp"
#include "services.hpp"

using namespace std::chrono_literals;

namespace {

// What a schedule holds: one hold of a primitive, or a multi-lock's set, behind one interface.
class Held {
 public:
  Held() = default;
  Held(dlock::LockGuard one) : one_(std::move(one)) {}          // NOLINT: implicit, for the table's brevity
  Held(dlock::MultiLockGuard many) : many_(std::move(many)) {}  // NOLINT
  explicit operator bool() const { return one_ ? static_cast<bool>(*one_) : many_ && static_cast<bool>(*many_); }
  bool lost() const { return one_ ? one_->lost() : many_ && many_->lost(); }
  void unlock() { one_ ? one_->unlock() : many_->unlock(); }
  void detach() { one_ ? one_->detach() : many_->detach(); }
  std::uint64_t fencing_token() const { return one_ ? one_->fencing_token() : many_->guards().front().fencing_token(); }

 private:
  std::optional<dlock::LockGuard> one_;
  std::optional<dlock::MultiLockGuard> many_;
};

using Take = std::function<Held(dlock::RedisLockService&, const std::string& key, dlock::LockOptions)>;

// One primitive as the schedules see it: how to take a key, and how another owner tries what a hold excludes
// (a read lock excludes writers only).
struct Primitive {
  std::string name;
  Take take;
  Take try_take;
  Take try_excluded;
};

// Deletes every hold of `key` in Redis, of whichever primitive, as an operator or an eviction would.
void delete_holds(const dlock::test::RedisServer& redis, const std::string& key) {
  for (const std::string& hash : {"dlock:{" + key + "}", "dlock:{" + key + "}:rw:write"}) {
    if (redis.run({"TYPE", hash}) == "hash") redis.run({"DEL", hash});
  }
  for (const std::string& set : {"dlock:{" + key + "}:rw:readers", "dlock:{" + key + "}:semaphore:holders"}) {
    const std::string id = redis.run({"SMEMBERS", set});
    if (!id.empty()) redis.run({"DEL", set + ":" + id});
  }
}

std::vector<Primitive> primitives() {
  return {
      {"lock", [](auto& s, const auto& k, auto o) { return s.lock(k, o); },
       [](auto& s, const auto& k, auto o) { return s.try_lock(k, o); },
       [](auto& s, const auto& k, auto o) { return s.try_lock(k, o); }},
      {"read lock", [](auto& s, const auto& k, auto o) { return s.read_lock(k, o); },
       [](auto& s, const auto& k, auto o) { return s.try_read_lock(k, o); },
       [](auto& s, const auto& k, auto o) { return s.try_write_lock(k, o); }},
      {"write lock", [](auto& s, const auto& k, auto o) { return s.write_lock(k, o); },
       [](auto& s, const auto& k, auto o) { return s.try_write_lock(k, o); },
       [](auto& s, const auto& k, auto o) { return s.try_read_lock(k, o); }},
      {"permit", [](auto& s, const auto& k, auto o) { return s.semaphore(k, 1).acquire(1, o); },
       [](auto& s, const auto& k, auto o) { return s.semaphore(k, 1).try_acquire(1, o); },
       [](auto& s, const auto& k, auto o) { return s.semaphore(k, 1).try_acquire(1, o); }},
      {"multi-lock", [](auto& s, const auto& k, auto o) { return s.lock_all({k, k + "-2"}, o); },
       [](auto& s, const auto& k, auto o) { return s.try_lock_all({k, k + "-2"}, o); },
       [](auto& s, const auto& k, auto o) { return s.try_lock(k, o); }},
  };
}

}  // namespace

// --- Reproduction 1: a detached write lock admitted its own thread as a reader.
TEST_CASE("a detached write lock is held against its own thread's readers and writers", "[rules][read_write]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.logging.level = "off"; });
  service->write_lock("report", {.lease = 20s}).detach();
  REQUIRE(redis.run({"EXISTS", "dlock:{report}:rw:write"}) == "1");
  CHECK_FALSE(service->try_read_lock("report"));   // failed: granted, a read beside a write
  CHECK_FALSE(service->try_write_lock("report"));
  // A read inside a write the thread still holds is granted at once, as before.
  auto write = service->write_lock("inner", {.lease = 20s});
  auto read = service->try_read_lock("inner");
  CHECK(read);
}

// --- Reproduction 3: a writer whose grant was adopted was handed fencing token 0.
TEST_CASE("a write lock adopted after a lost reply gets a new token, larger than the last writer's",
          "[rules][read_write][fencing]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.command_timeout = 300ms;
    c.logging.level = "off";
  });
  std::uint64_t previous = 0;
  {
    auto first = service->write_lock("ledger");
    previous = first.fencing_token();
  }
  REQUIRE(previous > 0);
  std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
  CHECK_THROWS_AS(service->try_write_lock("ledger", {.wait = 200ms}), dlock::ConnectionError);  // sent, given up on
  sleeper.join();
  REQUIRE(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{ledger}:rw:write"}) == "1"; }, 3s));
  redis.run({"DEL", "dlock:{ledger}:rw:fence"});  // the counter's retention ran out
  auto adopted = service->try_write_lock("ledger");
  REQUIRE(adopted);
  CHECK(adopted.fencing_token() > previous);  // failed: 0
}

// --- Reproduction 2: a lost permit's holder was never told when its release's reply was lost.
TEST_CASE("a hold deleted, then released through a stall that loses the reply, is never reported released",
          "[rules][fault]") {
  for (const Primitive& primitive : primitives()) {
    DYNAMIC_SECTION(primitive.name) {
      dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
      auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
        c.redis.command_timeout = 300ms;
        c.logging.level = "off";
      });
      auto guard = primitive.take(*service, "stalled", {.wait = 1s, .lease = 20s});
      REQUIRE(guard);
      delete_holds(redis, "stalled");
      std::thread sleeper = dlock::test::sleep_redis(redis, "0.8");
      std::this_thread::sleep_for(50ms);
      // The outcome class of the lock: an error the holder sees (ConnectionError or LockLostError), never success.
      bool told = false;
      try {
        guard.unlock();
      } catch (const dlock::ConnectionError&) {
        told = true;
      } catch (const dlock::LockLostError&) {
        told = true;
      }
      sleeper.join();
      CHECK(told);  // failed for the permit, the read and the write lock: unlock() returned normally
    }
  }
}

// --- Reproduction 4: with replica acknowledgements withheld, the timeout said "busy".
TEST_CASE("with every replica silent, each primitive's wait ends saying the replicas did not acknowledge",
          "[rules][replica_acks]") {
  dlock::test::ReplicatedPair pair;
  auto service = dlock::test::make_service(pair.master, [](dlock::Config& c) {
    c.lock.replica_acks = 1;
    c.lock.replica_ack_timeout = 100ms;
    c.logging.level = "off";
  });
  pair.replica.freeze();
  for (const Primitive& primitive : primitives()) {
    DYNAMIC_SECTION(primitive.name) {
      CHECK_THROWS_WITH(primitive.take(*service, "ack", {.wait = 400ms}),
                        Catch::Contains("not acknowledged by enough replicas"));  // failed: "held in a conflicting
                                                                                   // mode", "too few permits free",
                                                                                   // lock_all's "still busy"
    }
  }
  pair.replica.thaw();
}

// --- Reproduction 5: the holder index sets had no expiry and were the only record of who holds.
TEST_CASE("a hold's index entry deleted is a lost hold: its holder is told at the next renewal",
          "[rules][eviction]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.lock.watchdog_timeout = 1500ms;  // renewed every 500 ms
    c.logging.level = "off";
  });
  // The key whose loss must be noticed, per primitive: the lock's hash, the writer's record, the readers'
  // and the permit holders' index sets.
  const std::vector<std::pair<Primitive, std::string>> rows = {
      {primitives()[0], "dlock:{indexed}"},
      {primitives()[1], "dlock:{indexed}:rw:readers"},
      {primitives()[2], "dlock:{indexed}:rw:write"},
      {primitives()[3], "dlock:{indexed}:semaphore:holders"},
  };
  for (const auto& [primitive, name] : rows) {
    DYNAMIC_SECTION(primitive.name) {
      auto guard = primitive.take(*service, "indexed", {});
      REQUIRE(guard);
      // Every key that records the hold expires, so an abandoned one never stays: the index too.
      CHECK(std::stoll(redis.run({"PTTL", name})) > 0);  // failed for the index sets: -1, no expiry
      REQUIRE(redis.run({"DEL", name}) == "1");
      CHECK(dlock::test::eventually([&] { return guard.lost(); }, 5s));  // failed: never told
    }
  }
}

TEST_CASE("a held permit's and a reader's index outlives their leases while they are renewed", "[rules][eviction]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.lock.watchdog_timeout = 600ms;  // renewed every 200 ms
    c.logging.level = "off";
  });
  auto permit = service->semaphore("kept", 2).acquire();
  auto reader = service->read_lock("kept");
  std::this_thread::sleep_for(2s);  // several leases
  CHECK_FALSE(permit.lost());
  CHECK_FALSE(reader.lost());
  CHECK(redis.run({"SCARD", "dlock:{kept}:semaphore:holders"}) == "1");
  CHECK(redis.run({"SCARD", "dlock:{kept}:rw:readers"}) == "1");
  CHECK(service->semaphore("kept", 2).available() == 1);
}

// The schedule table's other rows, the same outcome for every primitive.
TEST_CASE("the same schedules give every primitive the same outcome", "[rules]") {
  dlock::test::RedisServer redis({"--enable-debug-command", "yes"});
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) {
    c.redis.command_timeout = 300ms;
    c.logging.level = "off";
  });
  auto other = dlock::test::make_service(redis, [](dlock::Config& c) { c.logging.level = "off"; });
  for (const Primitive& primitive : primitives()) {
    DYNAMIC_SECTION(primitive.name << ": detached, held against its own thread and others") {
      const std::string key = "detached-" + std::to_string(primitive.name.size());
      primitive.take(*service, key, {.lease = 20s}).detach();
      CHECK_FALSE(primitive.try_excluded(*service, key, {}));
      CHECK_FALSE(primitive.try_excluded(*other, key, {}));
    }
    DYNAMIC_SECTION(primitive.name << ": a try whose reply was lost is adopted by the next try, once") {
      const std::string key = "orphan-" + std::to_string(primitive.name.size());
      primitive.take(*service, key, {}).unlock();  // scripts loaded: the call given up on is the acquire itself
      std::thread sleeper = dlock::test::sleep_redis(redis, "1.0");
      CHECK_THROWS_AS(primitive.try_take(*service, key, {.wait = 200ms}), dlock::ConnectionError);
      sleeper.join();
      auto adopted = primitive.try_take(*service, key, {.wait = 2s});
      CHECK(adopted);
      CHECK_FALSE(primitive.try_excluded(*other, key, {}));  // the adopted grant excludes others
      adopted.unlock();
      CHECK(primitive.try_excluded(*other, key, {}));  // its release frees the key: nothing idles out a lease
    }
    DYNAMIC_SECTION(primitive.name << ": a hold deleted in Redis is reported lost at its release") {
      const std::string key = "deleted-" + std::to_string(primitive.name.size());
      auto guard = primitive.take(*service, key, {.lease = 20s});
      REQUIRE(guard);
      delete_holds(redis, key);
      CHECK_THROWS_AS(guard.unlock(), dlock::LockLostError);
      CHECK(guard.lost());
    }
  }
}
