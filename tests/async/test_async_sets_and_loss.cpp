// The async API beyond one lock, on a real redis-server: sets of keys
// (async_lock_all), a lost lock cancelling the holder's work
// (LossCancellation), a blocking acquisition refused on an Asio thread, and
// the coroutine block released on every way out.
#include <catch2/catch.hpp>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>

#include <future>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlock/asio.hpp"
#include "services.hpp"

using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;

TEST_CASE("async: async_lock_all takes every key of a set under one owner or none", "[async][multi]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  const std::vector<std::string> keys{"cart:b", "cart:a", "cart:c"};
  dlock::MultiLockGuard set = dlock::async_lock_all(*service, keys, {}, asio::use_future).get();
  REQUIRE(set);
  CHECK(set.size() == 3);
  CHECK(set.guards().front().key() == "cart:a");  // taken sorted
  // One owner for the set: every key's hold is the same owner's.
  CHECK(set.guard("cart:b").owner() == set.guard("cart:a").owner());
  CHECK(service->hold_count("cart:c", set.guard("cart:a").owner()) == 1);
  // Another acquisition (its own owner) finds the set busy.
  CHECK_FALSE(dlock::async_try_lock_all(*service, {"cart:c", "cart:d"}, {}, asio::use_future).get());
  CHECK(redis.run({"EXISTS", "dlock:{cart:d}"}) == "0");  // nothing of a set not had stays held
  CHECK_THROWS_AS(dlock::async_lock_all(*service, {"cart:d", "cart:a"}, {.wait = 150ms}, asio::use_future).get(),
                  dlock::LockTimeoutError);
  CHECK(redis.run({"EXISTS", "dlock:{cart:d}"}) == "0");
  // Bad input is the blocking call's error, through the completion.
  CHECK_THROWS_AS(dlock::async_lock_all(*service, std::vector<std::string>{}, {}, asio::use_future).get(),
                  dlock::InvalidArgument);
  set.unlock();
  CHECK(redis.run({"EXISTS", "dlock:{cart:a}", "dlock:{cart:b}", "dlock:{cart:c}"}) == "0");
}

namespace {

asio::awaitable<int> lock_set_or_timeout(dlock::RedisLockService& service) {
  asio::steady_timer timer(co_await asio::this_coro::executor, 300ms);
  // A named range: GCC 12 cannot keep a braced list's array alive across a co_await ("array used as initializer").
  const std::vector<std::string> keys{"set:1", "set:2"};
  auto which = co_await (dlock::async_lock_all(service, keys, {.wait = 30s}, asio::use_awaitable) ||
                         timer.async_wait(asio::use_awaitable));
  co_return static_cast<int>(which.index());
}

}  // namespace

TEST_CASE("async: a cancelled async_lock_all gives back the keys it had taken", "[async][multi]") {
  dlock::test::RedisServer redis;
  auto holder_service = dlock::test::make_service(redis);
  auto service = dlock::test::make_service(redis);
  dlock::LockGuard second = holder_service->lock("set:2");  // the set gets set:1, then waits for set:2
  asio::io_context io;
  std::future<int> which = asio::co_spawn(io, lock_set_or_timeout(*service), asio::use_future);
  io.run();
  CHECK(which.get() == 1);  // the timer won
  CHECK(dlock::test::eventually([&] { return redis.run({"EXISTS", "dlock:{set:1}"}) == "0"; }));
  CHECK(redis.run({"ZCARD", "dlock:{set:2}:queue"}) == "0");
  CHECK(holder_service->try_lock("set:1"));
}

namespace {

// Awaits a minute-long timer bound to the lock's loss; returns how it ended.
asio::awaitable<std::error_code> work_until_lost(dlock::LockGuard& guard) {
  dlock::LossCancellation on_loss(guard, co_await asio::this_coro::executor);
  asio::steady_timer long_work(co_await asio::this_coro::executor, 60s);
  std::error_code ended;
  try {
    co_await long_work.async_wait(asio::bind_cancellation_slot(on_loss.slot(), asio::use_awaitable));
  } catch (const asio::system_error& e) {
    ended = e.code();
  }
  co_return ended;
}

}  // namespace

TEST_CASE("async: a lost lock cancels the work bound to its LossCancellation", "[async][lost]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis, [](dlock::Config& c) { c.lock.watchdog_timeout = 600ms; });
  dlock::LockGuard guard = dlock::async_lock(*service, "lost:work", {}, asio::use_future).get();
  REQUIRE(guard);
  asio::io_context io;
  std::future<std::error_code> ended = asio::co_spawn(io, work_until_lost(guard), asio::use_future);
  std::thread runner([&] { io.run(); });
  redis.run({"DEL", "dlock:{lost:work}"});  // forced out: the next renewal (a third of 600 ms) finds it gone
  // Within the watchdog's verdict, not the timer's minute.
  const auto status = ended.wait_for(20s);
  if (status != std::future_status::ready) io.stop();
  runner.join();
  REQUIRE(status == std::future_status::ready);
  CHECK(ended.get() == asio::error::operation_aborted);
  CHECK(guard.lost());
}

TEST_CASE("async: a blocking acquisition owned by the thread is refused on an Asio thread", "[async][refusal]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  asio::io_context io;
  std::string refused;
  bool with_owner = false;
  asio::post(io, [&] {
    try {
      dlock::LockGuard guard = service->lock("loop");
    } catch (const dlock::InvalidArgument& e) {
      refused = e.what();
    }
    // An explicit owner blocks this thread on purpose: allowed.
    with_owner = static_cast<bool>(service->lock("loop", {.owner = dlock::Owner::create()}));
  });
  io.run();
  CHECK_THAT(refused, Catch::Matchers::Contains("loop") && Catch::Matchers::Contains("async_lock"));
  CHECK(with_owner);
  // A thread_pool's threads run an Asio loop too; read locks, semaphores and sets are refused alike.
  asio::thread_pool pool(1);
  std::promise<int> refusals;
  asio::post(pool, [&] {
    int count = 0;
    const dlock::Semaphore permits = service->semaphore("loop:permits", 1);
    const std::vector<std::function<void()>> calls{
        [&] { (void)service->read_lock("loop:doc"); },
        [&] { (void)permits.acquire(); },
        [&] { (void)service->lock_all({"loop:a", "loop:b"}); },
        [&] {
          DISTRIBUTED_LOCK_SERVICE(service);
          WITH_DISTRIBUTED_LOCK("loop:block") {}
        },
    };
    for (const auto& call : calls) {
      try {
        call();
      } catch (const dlock::InvalidArgument&) {
        ++count;
      }
    }
    refusals.set_value(count);
  });
  CHECK(refusals.get_future().get() == 4);
  pool.join();
  // Off the loop, the thread's own owner is fine.
  CHECK(service->lock("loop"));
  CHECK(redis.run({"EXISTS", "dlock:{loop:doc}", "dlock:{loop:a}", "dlock:{loop:block}"}) == "0");
}

namespace {

asio::awaitable<void> co_block_throws(std::shared_ptr<dlock::RedisLockService> service, bool& inside) {
  DISTRIBUTED_LOCK_SERVICE(service);
  CO_WITH_DISTRIBUTED_LOCK("co:throws") {
    inside = true;
    throw std::runtime_error("the body failed");
  }
}

asio::awaitable<int> co_block_returns(std::shared_ptr<dlock::RedisLockService> service) {
  DISTRIBUTED_LOCK_SERVICE(service);
  CO_WITH_DISTRIBUTED_LOCK("co:returns", {.wait = 5s}) {
    co_return 42;
  }
  co_return 0;
}

}  // namespace

TEST_CASE("async: CO_WITH_DISTRIBUTED_LOCK releases on an exception and on co_return", "[async][macros]") {
  dlock::test::RedisServer redis;
  auto service = dlock::test::make_service(redis);
  asio::io_context io;
  bool inside = false;
  std::future<void> threw = asio::co_spawn(io, co_block_throws(service, inside), asio::use_future);
  std::future<int> returned = asio::co_spawn(io, co_block_returns(service), asio::use_future);
  io.run();
  CHECK(inside);
  CHECK_THROWS_AS(threw.get(), std::runtime_error);
  CHECK(returned.get() == 42);
  CHECK(dlock::test::eventually(
      [&] { return redis.run({"EXISTS", "dlock:{co:throws}", "dlock:{co:returns}"}) == "0"; }));
}
