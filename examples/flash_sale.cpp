// A flash sale: buyers on many threads (and processes) each try to buy one
// unit of a SKU. The stock is a plain Redis string read with GET and written
// with SET — deliberately not atomic — so only the distributed lock keeps the
// sale from overselling. Run it with --no-lock to see the oversell it prevents.
//
//   flash_sale --config config/dlock.yaml --sku SKU-1 --stock 100 --buyers 300 --threads 8 --processes 2 --reset
//   flash_sale --multi-sku --reset   # orders of 1–3 SKUs of a catalogue, each under one multi-lock

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "example_errors.hpp"
#include "example_flags.hpp"
#include "multi_sku_sale.hpp"
#include "payment_step.hpp"

namespace {

const char* const kUsage =
    "usage: flash_sale [--config FILE] [--sku SKU] [--stock N] [--buyers B] [--threads T] [--processes P]\n"
    "                  [--reset] [--no-lock] [--multi-sku [--catalogue K]] [--payment-slots N]\n"
    "                  [--unlimited-payments] [--payment-ms MS]\n"
    "  --config FILE    dlock YAML config (default config/dlock.yaml)\n"
    "  --sku SKU        the product on sale (default SKU-1); stock lives at Redis key stock:SKU\n"
    "  --stock N        units on sale, set only if the sale does not exist yet (default 100)\n"
    "  --buyers B       orders each process places (default 300)\n"
    "  --threads T      buyer threads per process (default 8)\n"
    "  --processes P    buyer processes to fork (default 1)\n"
    "  --reset          start the sale afresh: stock N, nothing sold\n"
    "  --no-lock        deduct without the lock, to show the oversell\n"
    "  --multi-sku      each order takes 1-3 SKUs of a catalogue SKU-1..SKU-K (stock N each), all or none,\n"
    "                   under one multi-lock; the final line adds orders= and torn= (half-filled orders)\n"
    "  --catalogue K    SKUs in the catalogue with --multi-sku (default 5)\n"
    "  --payment-slots N  each accepted order then pays through a provider that takes at most N calls\n"
    "                   at once across all processes, under a distributed semaphore (default 4); the\n"
    "                   last line shows the highest concurrency seen; 0 leaves the step out (the\n"
    "                   default over a Redlock, where semaphores are not offered). A buyer killed\n"
    "                   mid-call stops counting before its permit comes back, so a sale continued\n"
    "                   after a crash is not accused of calls the dead left behind\n"
    "  --unlimited-payments  pay without the semaphore (the stock's lock stays on), to see the\n"
    "                   payment check catch calls past the slots: the sale then fails\n"
    "  --payment-ms MS  how long the provider takes per call (default 2)\n";

struct Sale {
  std::string stock_key, sold_key, initial_key;
};

long long integer_of(const dlock::RedisReply& reply) { return reply.is_nil() ? 0 : std::stoll(reply.str); }

// One order: read the stock, and if any is left write it back one lower.
bool buy_one(dlock::RedisExecutor& redis, const Sale& sale) {
  long long stock = integer_of(redis.command({"GET", sale.stock_key}));
  if (stock <= 0) return false;
  redis.command({"SET", sale.stock_key, std::to_string(stock - 1)});
  redis.command({"INCR", sale.sold_key});
  return true;
}

// Runs this process' buyers; returns {accepted, refused}.
std::pair<long long, long long> run_buyers(const dlock::Config& config, const Sale& sale, const std::string& sku,
                                           const example::PaymentStep& payment, long long buyers, long long threads,
                                           bool use_lock) {
  auto service = dlock::make_lock_service(config);
  dlock::set_default_lock_service(service);
  auto redis = dlock::make_executor(config.redis);

  std::atomic<long long> next{0}, accepted{0}, refused{0};
  std::vector<std::thread> workers;
  example::FirstWorkerError error;
  for (long long t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      error.run([&] {
        while (next.fetch_add(1) < buyers) {
          bool bought = false;
          if (use_lock) {
            WITH_DISTRIBUTED_LOCK("stock:{}", sku, {.wait = std::chrono::seconds(30)}) {
              bought = buy_one(*redis, sale);
            }
          } else {
            bought = buy_one(*redis, sale);
          }
          if (bought) payment.pay(*service, *redis, use_lock);  // outside the stock's lock
          (bought ? accepted : refused).fetch_add(1);
        }
      });
    });
  }
  for (auto& worker : workers) worker.join();
  if (use_lock) std::cout << "process " << ::getpid() << " lock stats: " << dlock::format_stats(service->stats()) << std::endl;
  dlock::set_default_lock_service(nullptr);
  error.rethrow_if_any();
  return {accepted.load(), refused.load()};
}

// The --multi-sku orders of this process.
std::pair<long long, long long> run_orders(const dlock::Config& config, const example::Catalogue& catalogue,
                                           const example::PaymentStep& payment, long long orders, long long threads,
                                           bool use_lock) {
  auto service = dlock::make_lock_service(config);
  auto redis = dlock::make_executor(config.redis);
  auto tally = example::place_orders(*service, *redis, catalogue, payment, orders, threads, use_lock);
  if (use_lock) std::cout << "process " << ::getpid() << " lock stats: " << dlock::format_stats(service->stats()) << std::endl;
  return tally;
}

}  // namespace

int main(int argc, char** argv) {
  example::Flags flags(argc, argv,
                       {"--config", "--sku", "--stock", "--buyers", "--threads", "--processes", "--catalogue",
                        "--payment-slots", "--payment-ms"},
                       {"--reset", "--no-lock", "--multi-sku", "--unlimited-payments"}, kUsage);
  const std::string sku = flags.text("--sku", "SKU-1");
  const long long stock = flags.number("--stock", 100, 0);
  const long long buyers = flags.number("--buyers", 300, 0);
  const long long threads = flags.number("--threads", 8, 1);
  const long long processes = flags.number("--processes", 1, 1);
  const bool use_lock = !flags.has("--no-lock");
  const bool multi_sku = flags.has("--multi-sku");
  const Sale sale{"stock:" + sku, "sold:" + sku, "stock:" + sku + ":initial"};
  const example::Catalogue catalogue = example::Catalogue::of(sku, flags.number("--catalogue", 5, 1));
  const long long payment_slots = flags.number("--payment-slots", 4, 0);
  const std::chrono::milliseconds payment_takes(flags.number("--payment-ms", 2, 0));

  return example::run_reporting_errors([&] {
    const dlock::Config config = dlock::load_config(flags.text("--config", "config/dlock.yaml"));
    // Semaphores are not offered over a Redlock: there the payment step is left out unless asked for.
    const bool redlock = config.redis.mode == dlock::RedisMode::redlock;
    const example::PaymentStep payment(sku, redlock && !flags.has("--payment-slots") ? 0 : payment_slots,
                                       config.lock.watchdog_timeout, !flags.has("--unlimited-payments"),
                                       payment_takes);
    {
      const auto redis_executor = dlock::make_executor(config.redis);
      dlock::RedisExecutor& redis = *redis_executor;
      if (flags.has("--reset")) payment.reset(redis);
      // A service of its own, gone before any buyer process forks.
      if (use_lock) payment.open(*dlock::make_lock_service(config));
      if (multi_sku) {
        example::open_catalogue(redis, catalogue, stock, flags.has("--reset"));
      } else {
        // One DEL per key: in a Redis Cluster the three keys live in different slots.
        if (flags.has("--reset")) {
          for (const std::string& key : {sale.stock_key, sale.sold_key, sale.initial_key}) redis.command({"DEL", key});
        }
        // SET NX: separately started processes join the same sale instead of restocking it.
        redis.command({"SET", sale.stock_key, std::to_string(stock), "NX"});
        redis.command({"SET", sale.initial_key, std::to_string(stock), "NX"});
      }
    }
    std::cout << "flash sale of "
              << (multi_sku ? "orders of 1-3 of " + std::to_string(catalogue.skus.size()) + " SKUs " + sku + "-*"
                            : sku)
              << ": " << processes << " process(es) x " << threads << " thread(s), " << buyers << " order(s) each, "
              << (use_lock ? "WITH the distributed lock" : "WITHOUT a lock") << std::endl;

    // This process' buyers, then their tally.
    auto buy = [&] {
      const auto [accepted, refused] = multi_sku ? run_orders(config, catalogue, payment, buyers, threads, use_lock)
                                                 : run_buyers(config, sale, sku, payment, buyers, threads, use_lock);
      std::cout << "process " << ::getpid() << ": accepted=" << accepted << " refused=" << refused << std::endl;
    };
    std::vector<pid_t> children;
    for (long long p = 1; p < processes; ++p) {
      std::fflush(nullptr);
      pid_t child = ::fork();  // before this process starts any thread
      if (child < 0) throw std::runtime_error("fork failed");
      if (child == 0) {
        buy();
        std::_Exit(0);
      }
      children.push_back(child);
    }
    buy();
    bool children_ok = true;
    for (pid_t child : children) {
      int status = 0;
      ::waitpid(child, &status, 0);
      children_ok = children_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }

    const auto redis_executor = dlock::make_executor(config.redis);
    dlock::RedisExecutor& redis = *redis_executor;
    // The payment line first: the sale's own tally stays the last line.
    bool right = payment.report(redis);
    if (use_lock && !right) std::cerr << "error: more payment calls at once than the semaphore allows\n";
    if (multi_sku) {
      right = example::report_catalogue(redis, catalogue) && right;
    } else {
      const long long final_stock = integer_of(redis.command({"GET", sale.stock_key}));
      const long long sold = integer_of(redis.command({"GET", sale.sold_key}));
      const long long initial = integer_of(redis.command({"GET", sale.initial_key}));
      const long long oversold = sold > initial ? sold - initial : 0;
      std::cout << "final_stock=" << final_stock << " sold=" << sold << " oversold=" << oversold << std::endl;
      right = oversold == 0 && right;
    }
    if (!children_ok) {
      std::cerr << "error: a buyer process failed\n";
      return 1;
    }
    if (use_lock && !right) {
      std::cerr << "error: the sale went wrong with the lock on (see the lines above)\n";
      return 1;
    }
    return 0;
  });
}
