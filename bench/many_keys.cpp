// Part 6: 8 threads each cycling over keys of their own (no contention):
// the pool must not serialise callers. Compared with 8 threads of the ideal
// client, in alternating halves.
#include <atomic>
#include <thread>

#include "bench_target.hpp"
#include "dlock/dlock.hpp"
#include "ideal_client.hpp"

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

struct DlockCycle {
  dlock::RedisLockService& service;
  int prepare(int) const { return 0; }
  void run(int, int thread, int key) const { service.lock(key_of(thread, key)).unlock(); }
};

}  // namespace

bool run_many_keys(Report& report, const Target& target) {
  const double half = target.quick ? 0.5 : 2.5;
  auto service = dlock::make_lock_service(target.config());
  double ideal = 0, ours = 0;
  for (int round = 0; round < 2; ++round) {
    ideal += cycles_per_second(half, IdealCycle{target});
    ours += cycles_per_second(half, DlockCycle{*service});
  }
  report.section("many keys: 8 threads, own keys, no contention");
  report.figure("ideal client cycles per second", ideal / 2, "ops/s");
  report.figure("dlock cycles per second", ours / 2, "ops/s");
  report.figure("ratio dlock / ideal", ours / ideal, "x", "target >= 0.9");
  return service->stats().lost == 0;
}

}  // namespace bench
