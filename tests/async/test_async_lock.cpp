// The async API (<dlock/asio.hpp>) on a real redis-server: coroutines on one
// io_context thread exclude each other; every completion token works; the
// handler runs on its executor; a wait runs out with the blocking call's
// error; a cancelled wait leaves the line and holds nothing; the blocking and
// async APIs exclude each other and re-enter by owner.
#include <catch2/catch.hpp>

#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <atomic>
#include <future>
#include <thread>
#include <variant>

#include "dlock/asio.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

namespace {

struct Section {
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> done{0};
};

// One coroutine: `rounds` critical sections on `key`, each awaiting a 1 ms timer inside.
asio::awaitable<void> worker(dlock::RedisLockService& service, std::string key, int rounds, Section& section) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (int i = 0; i < rounds; ++i) {
    dlock::LockGuard guard = co_await dlock::async_lock(service, key, {.wait = 30s}, asio::use_awaitable);
    if (section.inside.fetch_add(1) != 0) section.overlaps.fetch_add(1);
    timer.expires_after(1ms);
    co_await timer.async_wait(asio::use_awaitable);
    section.inside.fetch_sub(1);
    co_await dlock::async_unlock(std::move(guard), asio::use_awaitable);
    section.done.fetch_add(1);
  }
}

}  // namespace

TEST_CASE("async: coroutines on one io_context thread exclude each other (no re-entry by thread)", "[async]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  asio::io_context io;
  Section sections[2];  // one per key: holders of different keys may overlap
  constexpr int kCoroutines = 40;
  constexpr int kRounds = 5;
  for (int i = 0; i < kCoroutines; ++i) {
    asio::co_spawn(io, worker(*service, "sku:" + std::to_string(i % 2), kRounds, sections[i % 2]), asio::detached);
  }
  io.run();
  CHECK(sections[0].done.load() + sections[1].done.load() == kCoroutines * kRounds);
  CHECK(sections[0].overlaps.load() == 0);
  CHECK(sections[1].overlaps.load() == 0);
  CHECK(redis.run({"EXISTS", "dlock:{sku:0}", "dlock:{sku:1}"}) == "0");
}

TEST_CASE("async: a callback runs on its bound executor, never on a dlock thread", "[async]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  asio::io_context io;
  std::thread::id ran_on;
  dlock::LockGuard kept;
  dlock::async_lock(*service, "bound", {}, asio::bind_executor(io, [&](std::exception_ptr error, dlock::LockGuard guard) {
                      CHECK_FALSE(error);
                      ran_on = std::this_thread::get_id();
                      kept = std::move(guard);
                    }));
  io.run();
  CHECK(ran_on == std::this_thread::get_id());  // io.run()'s thread
  CHECK(kept);
  CHECK(redis.run({"EXISTS", "dlock:{bound}"}) == "1");
}

TEST_CASE("async: use_future and deferred complete as the blocking call would", "[async]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto other = dlock::test::make_service(redis);
  std::future<dlock::LockGuard> future = dlock::async_lock(*service, "future", {}, asio::use_future);
  dlock::LockGuard held = future.get();
  CHECK(held);
  // Busy: the wait runs out with the blocking call's own error and message.
  std::future<dlock::LockGuard> busy = dlock::async_lock(*other, "future", {.wait = 200ms}, asio::use_future);
  try {
    (void)busy.get();
    FAIL("a busy lock was granted");
  } catch (const dlock::LockTimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("lock 'future'"));
  }
  auto try_once = dlock::async_try_lock(*other, "future", {}, asio::experimental::deferred);
  std::promise<bool> had;
  std::move(try_once)([&](std::exception_ptr error, dlock::LockGuard guard) { had.set_value(!error && guard); });
  CHECK_FALSE(had.get_future().get());
}

namespace {

asio::awaitable<int> lock_or_timeout(dlock::RedisLockService& service, std::string key) {
  asio::steady_timer timer(co_await asio::this_coro::executor, 300ms);
  auto which = co_await (dlock::async_lock(service, key, {.wait = 30s}, asio::use_awaitable) ||
                         timer.async_wait(asio::use_awaitable));
  co_return static_cast<int>(which.index());
}

}  // namespace

TEST_CASE("async: a cancelled wait leaves the line at once and holds nothing", "[async]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);
  auto holder = holder_service->lock("cancelled");
  asio::io_context io;
  std::future<int> which = asio::co_spawn(io, lock_or_timeout(*service, "cancelled"), asio::use_future);
  io.run();
  CHECK(which.get() == 1);  // the timer won
  CHECK(redis.run({"ZCARD", "dlock:{cancelled}:queue"}) == "0");  // out of line at once
  holder.unlock();
  // The next waiter is not held up by the cancelled one.
  CHECK(holder_service->try_lock("cancelled"));
}

TEST_CASE("async: the blocking and async APIs exclude each other, and an owner re-enters across them", "[async]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  auto blocking = service->lock("mixed");
  // The same service and thread, no owner given: its own owner, so it is refused.
  CHECK_FALSE(dlock::async_try_lock(*service, "mixed", {}, asio::use_future).get());
  // With the blocking guard's owner: a counted re-entry.
  dlock::LockGuard inner = dlock::async_lock(*service, "mixed", {.owner = blocking.owner()}, asio::use_future).get();
  CHECK(inner);
  CHECK(redis.run({"HVALS", "dlock:{mixed}"}) == "2");
  inner.unlock();
  blocking.unlock();
  dlock::LockGuard async_held = dlock::async_lock(*service, "mixed", {}, asio::use_future).get();
  CHECK_FALSE(service->try_lock("mixed"));  // held by the async acquisition's own owner
}

TEST_CASE("async: read-write locks and semaphores have their async forms", "[async]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  dlock::LockGuard reader = dlock::async_read_lock(*service, "doc", {}, asio::use_future).get();
  dlock::LockGuard second = dlock::async_read_lock(*service, "doc", {}, asio::use_future).get();
  CHECK(reader);
  CHECK(second);
  CHECK_THROWS_AS(dlock::async_write_lock(*service, "doc", {.wait = 100ms}, asio::use_future).get(),
                  dlock::LockTimeoutError);
  const dlock::Semaphore payments = service->semaphore("payments", 2);
  dlock::LockGuard both = dlock::async_acquire(payments, 2, {}, asio::use_future).get();
  CHECK(both);
  CHECK_THROWS_AS(dlock::async_acquire(payments, 1, {.wait = 100ms}, asio::use_future).get(), dlock::LockTimeoutError);
}

namespace {

asio::awaitable<void> co_block(std::shared_ptr<dlock::RedisLockService> service, dlock::test::RedisServer& redis,
                               bool& ran) {
  DISTRIBUTED_LOCK_SERVICE(service);
  CO_WITH_DISTRIBUTED_LOCK("co:{}", 7) {
    ran = redis.run({"EXISTS", "dlock:{co:7}"}) == "1";
  }
}

}  // namespace

TEST_CASE("async: CO_WITH_DISTRIBUTED_LOCK holds the lock for its body and releases it after", "[async][macros]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  asio::io_context io;
  bool ran = false;
  asio::co_spawn(io, co_block(service, redis, ran), asio::detached);
  io.run();
  CHECK(ran);
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{co:7}"}) == "0"; }));
}
