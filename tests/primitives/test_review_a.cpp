// Review A: attempts to break multi-locks and read-write locks.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "services.hpp"

using namespace std::chrono_literals;

namespace {

std::string zcard(const dlock::test::RedisServer& redis, const std::string& name) {
  return redis.run({"ZCARD", name});
}

}  // namespace

// A writer waiting ahead of a reader gives up (its wait ran out) and leaves
// the line; the reader, blocked only by that writer, must be woken then, not
// sleep until its own retry (a third of the turn window, here 10 s) or the end
// of its wait. The lock's own leave script hands the turn on; the read-write
// lock's leave_shared_line_script publishes nothing.
TEST_CASE("review: a reader blocked only by a waiting writer is woken when that writer gives up", "[review][rwlock]") {
  dlock::test::RedisServer redis;
  auto tweak = [](dlock::Config& c) { c.lock.turn_window = 30s; };
  auto holder = dlock::test::make_service(redis, tweak);
  auto writer = dlock::test::make_service(redis, tweak);
  auto reader = dlock::test::make_service(redis, tweak);
  auto held = holder->read_lock("doc");
  REQUIRE(held);
  std::atomic<bool> writer_gave_up{false};
  std::thread w([&] {  // no Catch assertion off the main thread: Catch2 is not thread-safe
    try {
      writer->write_lock("doc", {.wait = 1500ms});
    } catch (const dlock::LockTimeoutError&) {
      writer_gave_up = true;
    }
  });
  CHECK(dlock::test::eventually([&] { return zcard(redis, "dlock:{doc}:rw:queue") == "1"; }));
  std::atomic<bool> reader_got{false};
  std::thread r([&] {
    auto guard = reader->read_lock("doc", {.wait = 15s});
    reader_got = bool(guard);
  });
  CHECK(dlock::test::eventually([&] { return zcard(redis, "dlock:{doc}:rw:queue") == "2"; }));
  CHECK_FALSE(reader_got.load());  // behind the writer
  w.join();
  CHECK(writer_gave_up.load());
  // Nothing blocks the reader now (a reader holds, nobody else waits): it should have it promptly,
  // well before its 15 s wait ends.
  CHECK(dlock::test::eventually([&] { return reader_got.load(); }, 5000ms));
  r.join();
  CHECK(reader_got.load());
}

// lock_all takes "a" (fixed lease 1 s), then waits for "b" (busy for 2.5 s).
// Meanwhile "a"'s lease runs out and another owner takes "a". lock_all must
// not then return the set as taken: all-or-nothing means every key is held
// when it returns; here another owner holds "a" at that moment.
TEST_CASE("review: lock_all never returns a set one of whose keys expired while it waited for a later key",
          "[review][multi]") {
  dlock::test::RedisServer redis;
  auto quiet = [](dlock::Config& c) { c.logging.level = "off"; };
  auto service = dlock::test::make_service(redis, quiet);
  auto holder = dlock::test::make_service(redis, quiet);
  auto other = dlock::test::make_service(redis, quiet);
  auto busy = holder->lock("b");
  std::atomic<bool> other_holds_a{false}, release_other{false};
  std::thread releaser([&] {
    std::this_thread::sleep_for(2500ms);
    busy.unlock();
  });
  std::thread rival([&] {
    // Waits for "a" behind lock_all's hold of it, and keeps it once had.
    dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{a}"}) == "1"; }, 5000ms);
    auto a = other->lock("a", {.wait = 8s});
    other_holds_a = bool(a);
    while (!release_other.load()) std::this_thread::sleep_for(10ms);
  });
  bool returned = false, whole = false, rival_inside_at_return = false;
  try {
    auto all = service->lock_all({"a", "b"}, {.wait = 8s, .lease = 1000ms});
    returned = true;
    rival_inside_at_return = other_holds_a.load();
    whole = bool(all) && !all.lost();
  } catch (const dlock::LockTimeoutError&) {
  } catch (const dlock::LockLostError&) {
  }
  release_other = true;
  releaser.join();
  rival.join();
  // Either lock_all refused (threw), or what it returned is whole and nobody else holds a key of it.
  if (returned) {
    CHECK(whole);
    CHECK_FALSE(rival_inside_at_return);
  }
}

// The same with a watchdog-renewed key, lost (deleted in Redis, found by the
// watchdog) while lock_all waits for a later key.
TEST_CASE("review: lock_all never returns a set one of whose keys was lost while it waited", "[review][multi][watchdog]") {
  dlock::test::RedisServer redis;
  auto quiet = [](dlock::Config& c) {
    c.logging.level = "off";
    c.lock.watchdog_timeout = 900ms;
  };
  auto service = dlock::test::make_service(redis, quiet);
  auto holder = dlock::test::make_service(redis, quiet);
  auto busy = holder->lock("b");
  std::thread releaser([&] {
    dlock::test::eventually([&] { return redis.run({"ZCARD", "dlock:{b}:queue"}) == "1"; });
    redis.run({"DEL", "dlock:{a}"});  // "a", taken first, is lost while lock_all waits for "b"
    std::this_thread::sleep_for(1500ms);  // the watchdog's renewal finds it gone
    busy.unlock();
  });
  bool returned = false, whole = false;
  try {
    auto all = service->lock_all({"a", "b"}, {.wait = 8s});
    returned = true;
    whole = bool(all) && !all.lost() && redis.run({"EXISTS", "dlock:{a}"}) == "1";
  } catch (const dlock::Error&) {
  }
  releaser.join();
  if (returned) CHECK(whole);
}
