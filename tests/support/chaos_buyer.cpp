// A buyer process of the chaos flash sale (tests/faults/test_fault_chaos.cpp): its
// threads buy one item at a time under the lock `stock:SKU` until the stock
// is gone. The test SIGKILLs buyers while they hold the lock and starts new
// ones; accounting must survive that:
//   - inside the lock: GET the stock; if some is left, MULTI / SET stock-1 /
//     INCR sold / EXEC, so a kill lands before both writes or after both;
//   - `holder:SKU` names the pid inside the critical section (0 when none),
//     so the test knows whom to kill.
//
//   chaos_buyer --port P --sku S [--threads 8] [--lease-ms 1000] [--hold-ms 5]
// Exit 0 once the stock is 0; 2 on bad arguments; 3 on an unexpected error.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"

using namespace std::chrono_literals;

namespace {

struct Options {
  int port = 0;
  std::string sku;
  int threads = 8;
  int lease_ms = 1000;
  int hold_ms = 5;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--port") o.port = std::atoi(value);
    else if (flag == "--sku") o.sku = value;
    else if (flag == "--threads") o.threads = std::atoi(value);
    else if (flag == "--lease-ms") o.lease_ms = std::atoi(value);
    else if (flag == "--hold-ms") o.hold_ms = std::atoi(value);
    else {
      std::fprintf(stderr, "chaos_buyer: unknown option %s\n", flag.c_str());
      std::exit(2);
    }
  }
  if (o.port <= 0 || o.sku.empty() || o.threads <= 0 || o.lease_ms <= 0) {
    std::fprintf(stderr, "usage: chaos_buyer --port P --sku S [--threads N] [--lease-ms L] [--hold-ms H]\n");
    std::exit(2);
  }
  return o;
}

// One purchase attempt while holding the lock; false once the stock is gone.
bool buy_one(dlock::RedisExecutor& redis, const dlock::LockGuard& guard, const Options& o) {
  const std::string stock_key = "stock:" + o.sku;
  const std::string pid = std::to_string(::getpid());
  auto replies = redis.pipeline({{"SET", "holder:" + o.sku, pid}, {"GET", stock_key}});
  if (replies.size() != 2 || replies[1].type != dlock::RedisReply::Type::String) {
    throw dlock::Error("stock key " + stock_key + " is missing or not a string");
  }
  const long long stock = std::stoll(replies[1].str);
  if (stock <= 0) {
    redis.command({"SET", "holder:" + o.sku, "0"});
    return false;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(o.hold_ms));  // the work a kill lands in
  guard.check();  // a holder that lost its lock must not write
  auto done = redis.pipeline({{"MULTI"},
                              {"SET", stock_key, std::to_string(stock - 1)},
                              {"INCR", "sold:" + o.sku},
                              {"EXEC"},
                              {"SET", "holder:" + o.sku, "0"}});
  if (done.size() != 5 || done[3].type != dlock::RedisReply::Type::Array) {
    throw dlock::Error("the sale's MULTI/EXEC did not run");
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  dlock::Config config;
  config.redis.host = "127.0.0.1";
  config.redis.port = o.port;
  config.redis.pool_size = static_cast<std::size_t>(o.threads) + 2;
  config.redis.command_timeout = 2000ms;
  config.lock.watchdog_timeout = std::chrono::milliseconds(o.lease_ms);
  config.logging.level = "off";
  try {
    auto service = dlock::make_lock_service(config);
    auto data = std::make_shared<dlock::HiredisExecutor>(config.redis);
    std::atomic<bool> failed{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < o.threads; ++t) {
      threads.emplace_back([&] {
        bool more = true;
        while (more && !failed.load()) {
          try {
            auto guard = service->lock("stock:" + o.sku, {.wait = 3s});
            more = buy_one(*data, guard, o);
          } catch (const dlock::LockTimeoutError&) {
          } catch (const dlock::LockLostError&) {
          } catch (const dlock::ConnectionError&) {
            std::this_thread::sleep_for(50ms);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "chaos_buyer %d: %s\n", static_cast<int>(::getpid()), e.what());
            failed = true;
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
    return failed ? 3 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chaos_buyer: %s\n", e.what());
    return 3;
  }
}
