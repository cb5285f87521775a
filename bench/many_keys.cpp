// Part 6: 8 threads each cycling over keys of their own (no contention), a
// throughput-bound run where the server's time per cycle and the client's
// both count: the pool must not serialise callers, and the scripts must not
// cost the server much more than a minimal reentrant lock's. Compared with
// 8 threads of the minimal pair and of the ideal client (each thread its own
// hiredis connection), in alternating periods.
#include <atomic>
#include <thread>

#include "bench_target.hpp"
#include "dlock/dlock.hpp"
#include "ideal_client.hpp"
#include "minimal_pair_client.hpp"

namespace bench {
namespace {

constexpr int kThreads = 8;
constexpr int kKeysPerThread = 64;

template <typename Cycle>
double cycles_per_second(double seconds, Cycle cycle) {
  std::atomic<bool> stop{false};
  std::atomic<long long> total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      long long mine = 0;
      auto state = cycle.prepare(t);
      while (!stop.load(std::memory_order_relaxed)) {
        cycle.run(state, t, static_cast<int>(mine % kKeysPerThread));
        ++mine;
      }
      total += mine;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  return total / seconds;
}

std::string key_of(int thread, int key) { return "bench:many:" + std::to_string(thread) + ":" + std::to_string(key); }

struct IdealCycle {
  const Target& target;
  std::unique_ptr<IdealClient> prepare(int) const { return std::make_unique<IdealClient>(target.host, target.port); }
  void run(std::unique_ptr<IdealClient>& client, int thread, int key) const {
    const std::string name = "dlock:{" + key_of(thread, key) + "}";
    client->acquire(name, "ideal:" + std::to_string(thread), 30000);
    client->release(name, "ideal:" + std::to_string(thread));
  }
};

struct MinimalPairCycle {
  const Target& target;
  std::unique_ptr<MinimalPairClient> prepare(int) const {
    return std::make_unique<MinimalPairClient>(target.host, target.port);
  }
  void run(std::unique_ptr<MinimalPairClient>& client, int thread, int key) const {
    const std::string name = "{" + key_of(thread, key) + "}";
    const std::string owner = "minimal:" + std::to_string(thread);
    client->acquire(name, name + ":fence", owner, 30000);
    client->release(name, name + ":released", owner, 30000);
  }
};

struct DlockCycle {
  dlock::RedisLockService& service;
  int prepare(int) const { return 0; }
  void run(int, int thread, int key) const { service.lock(key_of(thread, key)).unlock(); }
};

}  // namespace

bool run_many_keys(Report& report, const Target& target) {
  const double period = target.quick ? 0.5 : 2.5;
  auto service = dlock::make_lock_service(target.config());
  double minimal = 0, ideal = 0, ours = 0;
  for (int round = 0; round < 2; ++round) {
    minimal += cycles_per_second(period, MinimalPairCycle{target});
    ideal += cycles_per_second(period, IdealCycle{target});
    ours += cycles_per_second(period, DlockCycle{*service});
  }
  report.section("many keys: 8 threads, own keys, no contention");
  report.figure("minimal pair cycles per second", minimal / 2, "ops/s");
  report.figure("ideal client cycles per second", ideal / 2, "ops/s", "dlock's scripts, raw");
  report.figure("dlock cycles per second", ours / 2, "ops/s");
  report.figure("ratio dlock / minimal pair", ours / minimal, "x", "target >= 0.9");
  report.figure("ratio dlock / ideal", ours / ideal, "x");
  return service->stats().lost == 0;
}

}  // namespace bench
