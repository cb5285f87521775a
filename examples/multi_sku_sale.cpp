#include "multi_sku_sale.hpp"

#include <algorithm>
#include <atomic>
#include <iostream>
#include <random>
#include <thread>

#include "example_errors.hpp"

namespace example {

namespace {

long long integer_of(const dlock::RedisReply& reply) { return reply.is_nil() ? 0 : std::stoll(reply.str); }

// One order: all of its SKUs in stock, or nothing is deducted.
bool fill(dlock::RedisExecutor& redis, const std::vector<std::string>& order) {
  std::vector<long long> stock;
  for (const std::string& sku : order) {
    stock.push_back(integer_of(redis.command({"GET", Catalogue::stock_key(sku)})));
    if (stock.back() <= 0) return false;
  }
  for (std::size_t i = 0; i < order.size(); ++i) {
    redis.command({"SET", Catalogue::stock_key(order[i]), std::to_string(stock[i] - 1)});
    redis.command({"INCR", Catalogue::sold_key(order[i])});
  }
  return true;
}

void tally(dlock::RedisExecutor& redis, const Catalogue& catalogue, std::size_t units) {
  redis.command({"INCR", catalogue.filled_orders_key()});
  redis.command({"INCRBY", catalogue.filled_units_key(), std::to_string(units)});
}

}  // namespace

Catalogue Catalogue::of(const std::string& base, long long size) {
  Catalogue catalogue;
  for (long long i = 1; i <= size; ++i) catalogue.skus.push_back(base + "-" + std::to_string(i));
  return catalogue;
}

void open_catalogue(dlock::RedisExecutor& redis, const Catalogue& catalogue, long long stock, bool reset) {
  // One command per key: in a Redis Cluster the keys live in different slots.
  if (reset) {
    for (const std::string& sku : catalogue.skus) {
      for (const std::string& key : {Catalogue::stock_key(sku), Catalogue::sold_key(sku), Catalogue::initial_key(sku)}) {
        redis.command({"DEL", key});
      }
    }
    redis.command({"DEL", catalogue.filled_orders_key()});
    redis.command({"DEL", catalogue.filled_units_key()});
  }
  for (const std::string& sku : catalogue.skus) {
    redis.command({"SET", Catalogue::stock_key(sku), std::to_string(stock), "NX"});
    redis.command({"SET", Catalogue::initial_key(sku), std::to_string(stock), "NX"});
  }
}

std::pair<long long, long long> place_orders(dlock::RedisLockService& service, dlock::RedisExecutor& redis,
                                             const Catalogue& catalogue, const PaymentStep& payment, long long orders,
                                             long long threads, bool use_lock) {
  DISTRIBUTED_LOCK_SERVICE(service);
  std::atomic<long long> next{0}, filled{0}, refused{0};
  std::vector<std::thread> workers;
  FirstWorkerError error;
  for (long long t = 0; t < threads; ++t) {
    workers.emplace_back([&, seed = std::random_device{}()] {
      error.run([&] {
        std::mt19937 random(seed);
        while (next.fetch_add(1) < orders) {
          std::vector<std::string> order = catalogue.skus;
          std::shuffle(order.begin(), order.end(), random);
          order.resize(std::min<std::size_t>(order.size(), 1 + random() % 3));
          bool done = false;
          if (use_lock) {
            WITH_DISTRIBUTED_LOCKS("stock:{}", order, {.wait = std::chrono::seconds(30)}) { done = fill(redis, order); }
          } else {
            done = fill(redis, order);
          }
          if (done) {
            payment.pay(service, redis, use_lock);  // after the stock's locks are released
            if (use_lock) {
              // The tally is every order's, whatever SKUs it took, so no stock lock covers it. Over a Redlock
              // a command runs on every node: increments racing each other reach the nodes in different
              // orders, their replies differ, and no majority agrees. So the tally is kept under a lock too.
              WITH_DISTRIBUTED_LOCK("{}", catalogue.filled_orders_key(), {.wait = std::chrono::seconds(30)}) {
                tally(redis, catalogue, order.size());
              }
            } else {
              tally(redis, catalogue, order.size());
            }
          }
          (done ? filled : refused).fetch_add(1);
        }
      });
    });
  }
  for (auto& worker : workers) worker.join();
  error.rethrow_if_any();
  return {filled.load(), refused.load()};
}

bool report_catalogue(dlock::RedisExecutor& redis, const Catalogue& catalogue) {
  long long stock = 0, sold = 0, oversold = 0, deducted = 0;
  for (const std::string& sku : catalogue.skus) {
    const long long left = integer_of(redis.command({"GET", Catalogue::stock_key(sku)}));
    const long long sold_here = integer_of(redis.command({"GET", Catalogue::sold_key(sku)}));
    const long long initial = integer_of(redis.command({"GET", Catalogue::initial_key(sku)}));
    // A unit sold twice (two buyers read the same stock) was sold without leaving the stock.
    oversold += std::max(0LL, sold_here - (initial - left)) + std::max(0LL, -left);
    stock += left;
    deducted += initial - left;
    sold += sold_here;
  }
  const long long orders = integer_of(redis.command({"GET", catalogue.filled_orders_key()}));
  const long long units = integer_of(redis.command({"GET", catalogue.filled_units_key()}));
  // Every unit that left a stock was taken by a filled order, and every filled order took all of its units.
  const long long torn = units > deducted ? units - deducted : deducted - units;
  std::cout << "final_stock=" << stock << " sold=" << sold << " orders=" << orders << " torn=" << torn
            << " oversold=" << oversold << std::endl;
  return oversold == 0 && torn == 0;
}

}  // namespace example
