// The flash sale of flash_sale.cpp in an async service: each process runs
// its buyers as C++20 coroutines on ONE io_context thread, and each order's
// critical section awaits (a 1 ms timer standing for an async call, such as
// a fraud check) between reading the stock and writing it back. Coroutines
// share that thread, so a lock owned by the thread would let every one of
// them in at once: CO_WITH_DISTRIBUTED_LOCK gives each coroutine its own
// owner and waits without blocking the thread. --no-lock shows the oversell.
//
//   async_flash_sale --config config/dlock.yaml --sku SKU-A --stock 100 --buyers 300 --coroutines 100 --processes 2 --reset
//
// The stock's own GET and SET are short blocking round trips, for brevity
// (the lock's calls are not: they run on dlock's I/O threads).

#include <sys/wait.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlock/asio.hpp"
#include "dlock/dlock.hpp"
#include "example_errors.hpp"
#include "example_flags.hpp"

namespace {

using namespace std::chrono_literals;

const char* const kUsage =
    "usage: async_flash_sale [--config FILE] [--sku SKU] [--stock N] [--buyers B] [--coroutines C] [--processes P]\n"
    "                        [--reset] [--no-lock]\n"
    "  --config FILE    dlock YAML config (default config/dlock.yaml)\n"
    "  --sku SKU        the product on sale (default SKU-A); stock lives at Redis key stock:SKU\n"
    "  --stock N        units on sale, set only if the sale does not exist yet (default 100)\n"
    "  --buyers B       orders each process places (default 300)\n"
    "  --coroutines C   buyer coroutines per process, all on one io_context thread (default 100)\n"
    "  --processes P    buyer processes to fork (default 1)\n"
    "  --reset          start the sale afresh: stock N, nothing sold\n"
    "  --no-lock        deduct without the lock, to show the oversell\n";

struct Sale {
  std::string sku, stock_key, sold_key, initial_key;
  bool use_lock = true;
};

struct Tally {
  long long next = 0, buyers = 0, accepted = 0, refused = 0;
};

long long integer_of(const dlock::RedisReply& reply) { return reply.is_nil() ? 0 : std::stoll(reply.str); }

// One order: read the stock, await the "fraud check", write it back one lower.
asio::awaitable<bool> buy_one(dlock::RedisExecutor& redis, const Sale& sale) {
  const long long stock = integer_of(redis.command({"GET", sale.stock_key}));
  if (stock <= 0) co_return false;
  asio::steady_timer fraud_check(co_await asio::this_coro::executor, 1ms);
  co_await fraud_check.async_wait(asio::use_awaitable);
  redis.command({"SET", sale.stock_key, std::to_string(stock - 1)});
  redis.command({"INCR", sale.sold_key});
  co_return true;
}

// One buyer coroutine: orders until this process has placed all of its own.
asio::awaitable<void> buyer(std::shared_ptr<dlock::RedisLockService> service, dlock::RedisExecutor& redis,
                            const Sale& sale, Tally& tally) {
  DISTRIBUTED_LOCK_SERVICE(service);
  while (tally.next++ < tally.buyers) {  // one thread: no atomics needed
    bool bought = false;
    if (sale.use_lock) {
      CO_WITH_DISTRIBUTED_LOCK("stock:{}", sale.sku, {.wait = 30s}) {
        bought = co_await buy_one(redis, sale);
      }
    } else {
      bought = co_await buy_one(redis, sale);
    }
    ++(bought ? tally.accepted : tally.refused);
  }
}

void run_buyers(const dlock::Config& config, const Sale& sale, long long buyers, long long coroutines) {
  auto service = dlock::make_lock_service(config);
  auto redis = dlock::make_executor(config.redis);
  Tally tally;
  tally.buyers = buyers;
  asio::io_context io;  // run by this thread alone
  // A buyer's error leaves io.run() (asio::detached would drop it without a word) and the process says it.
  const auto rethrow = [](const std::exception_ptr& error) {
    if (error) std::rethrow_exception(error);
  };
  for (long long c = 0; c < coroutines; ++c) asio::co_spawn(io, buyer(service, *redis, sale, tally), rethrow);
  io.run();
  if (sale.use_lock) std::cout << "process " << ::getpid() << " lock stats: " << dlock::format_stats(service->stats()) << "\n";
  std::cout << "process " << ::getpid() << ": accepted=" << tally.accepted << " refused=" << tally.refused
            << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  example::Flags flags(argc, argv, {"--config", "--sku", "--stock", "--buyers", "--coroutines", "--processes"},
                       {"--reset", "--no-lock"}, kUsage);
  Sale sale;
  sale.sku = flags.text("--sku", "SKU-A");
  sale.stock_key = "stock:" + sale.sku;
  sale.sold_key = "sold:" + sale.sku;
  sale.initial_key = "stock:" + sale.sku + ":initial";
  sale.use_lock = !flags.has("--no-lock");
  const long long stock = flags.number("--stock", 100, 0);
  const long long buyers = flags.number("--buyers", 300, 0);
  const long long coroutines = flags.number("--coroutines", 100, 1);
  const long long processes = flags.number("--processes", 1, 1);

  return example::run_reporting_errors([&] {
    const dlock::Config config = dlock::load_config(flags.text("--config", "config/dlock.yaml"));
    {
      const auto redis = dlock::make_executor(config.redis);
      // One DEL per key: in a Redis Cluster the three keys live in different slots.
      if (flags.has("--reset")) {
        for (const std::string& key : {sale.stock_key, sale.sold_key, sale.initial_key}) redis->command({"DEL", key});
      }
      redis->command({"SET", sale.stock_key, std::to_string(stock), "NX"});
      redis->command({"SET", sale.initial_key, std::to_string(stock), "NX"});
    }
    std::cout << "async flash sale of " << sale.sku << ": " << processes << " process(es) x " << coroutines
              << " coroutine(s) on one thread, " << buyers << " order(s) each, "
              << (sale.use_lock ? "WITH the distributed lock" : "WITHOUT a lock") << std::endl;

    std::vector<pid_t> children;
    for (long long p = 1; p < processes; ++p) {
      std::fflush(nullptr);
      const pid_t child = ::fork();  // before this process starts any thread
      if (child < 0) throw std::runtime_error("fork failed");
      if (child == 0) {
        run_buyers(config, sale, buyers, coroutines);
        std::_Exit(0);
      }
      children.push_back(child);
    }
    run_buyers(config, sale, buyers, coroutines);
    bool children_ok = true;
    for (const pid_t child : children) {
      int status = 0;
      ::waitpid(child, &status, 0);
      children_ok = children_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }

    const auto redis = dlock::make_executor(config.redis);
    const long long final_stock = integer_of(redis->command({"GET", sale.stock_key}));
    const long long sold = integer_of(redis->command({"GET", sale.sold_key}));
    const long long initial = integer_of(redis->command({"GET", sale.initial_key}));
    const long long oversold = sold > initial ? sold - initial : 0;
    std::cout << "final_stock=" << final_stock << " sold=" << sold << " oversold=" << oversold << std::endl;
    if (!children_ok) {
      std::cerr << "error: a buyer process failed\n";
      return 1;
    }
    if (sale.use_lock && oversold != 0) {
      std::cerr << "error: the sale oversold with the lock on\n";
      return 1;
    }
    return 0;
  });
}
