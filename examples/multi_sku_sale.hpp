#pragma once
// flash_sale --multi-sku: orders of 1–3 SKUs drawn from a small catalogue,
// each filled only if every SKU in it has stock, and then deducted on all of
// them — under one multi-lock (WITH_DISTRIBUTED_LOCKS), so no SKU oversells
// and no order is half filled. As in the one-SKU sale, stock is read with GET
// and written with SET, deliberately not atomic.

#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "payment_step.hpp"

namespace example {

struct Catalogue {
  std::vector<std::string> skus;  // "<base>-1" .. "<base>-N"
  static Catalogue of(const std::string& base, long long size);
  static std::string stock_key(const std::string& sku) { return "stock:" + sku; }
  static std::string sold_key(const std::string& sku) { return "sold:" + sku; }
  static std::string initial_key(const std::string& sku) { return "stock:" + sku + ":initial"; }
  std::string filled_orders_key() const { return "orders:" + skus.front() + ":filled"; }
  std::string filled_units_key() const { return "orders:" + skus.front() + ":units"; }
};

// Sets every SKU's stock (only where none exists yet, unless `reset`).
void open_catalogue(dlock::RedisExecutor& redis, const Catalogue& catalogue, long long stock, bool reset);

// Places `orders` random orders on `threads` threads; returns {filled, refused}.
// Each filled order then pays through `payment`.
std::pair<long long, long long> place_orders(dlock::RedisLockService& service, dlock::RedisExecutor& redis,
                                             const Catalogue& catalogue, const PaymentStep& payment, long long orders,
                                             long long threads, bool use_lock);

// Prints the final line "final_stock=… sold=… orders=… torn=… oversold=…"
// and returns whether the sale was right: no SKU sold more than it lost from
// its stock or than it had (oversold=0), and every filled order deducted all
// of its SKUs (torn=0: the units the filled orders took equal the units that
// left the stocks).
bool report_catalogue(dlock::RedisExecutor& redis, const Catalogue& catalogue);

}  // namespace example
