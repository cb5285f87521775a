// dlock-bench-redlock: Redlock mode (5 throwaway redis-servers) against one
// of them alone, in one run.
// 1. The uncontended lock+unlock cycle, in alternating blocks (the loopback
//    round trip changes mode within seconds, so only interleaved blocks
//    compare): the median µs per cycle of each and their ratio. The fan-out
//    is parallel, so a cycle costs the slowest of the 5 round trips.
// 2. 8 threads of one service contending for ONE key over the 5 nodes, each
//    holder doing a non-atomic read-modify-write of a shared counter: the
//    counter must come out exact; acquisitions per worker (spread = most /
//    fewest) and the time-to-acquire p50/p99.
//
//   build/bench/dlock-bench-redlock [--blocks N] [--cycles-per-block N] [--seconds S]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock/hiredis_executor.hpp"
#include "dlock/redlock_executor.hpp"
#include "redis_server.hpp"
#include "alternating_blocks.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using dlock::bench::block_us_per_cycle;
using dlock::bench::median;

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<std::size_t>(p * static_cast<double>(values.size())))];
}

// µs per round trip of PING through `redis` (for a Redlock: to every node, then every reply read).
double block_us_per_ping(dlock::RedisExecutor& redis, int rounds) {
  const auto started = Clock::now();
  for (int i = 0; i < rounds; ++i) (void)redis.command({"PING"});
  return std::chrono::duration<double, std::micro>(Clock::now() - started).count() / rounds;
}

// Returns whether the counter came out exact.
bool contention(dlock::RedisLockService& service, int threads, double seconds) {
  long long counter = 0;  // guarded by the distributed lock only
  std::atomic<bool> stop{false};
  std::vector<long long> acquired(static_cast<std::size_t>(threads), 0);
  std::vector<std::vector<double>> waits(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      while (!stop) {
        const auto asked = Clock::now();
        dlock::LockGuard guard = service.lock("bench:contended", {.wait = std::chrono::seconds(30)});
        waits[static_cast<std::size_t>(t)].push_back(std::chrono::duration<double, std::micro>(Clock::now() - asked).count());
        const long long seen = counter;
        std::this_thread::yield();
        counter = seen + 1;
        ++acquired[static_cast<std::size_t>(t)];
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& worker : workers) worker.join();
  long long total = 0;
  std::vector<double> all_waits;
  for (int t = 0; t < threads; ++t) {
    total += acquired[static_cast<std::size_t>(t)];
    all_waits.insert(all_waits.end(), waits[static_cast<std::size_t>(t)].begin(), waits[static_cast<std::size_t>(t)].end());
  }
  const auto [fewest, most] = std::minmax_element(acquired.begin(), acquired.end());
  std::printf("%d threads on one key over the Redlock, %.0f s: %lld acquisitions, counter %lld (%s), per worker %lld..%lld "
              "(spread %.2f), time to acquire p50 %.0f us p99 %.0f us\n",
              threads, seconds, total, counter, counter == total ? "exact" : "WRONG", *fewest, *most,
              *fewest > 0 ? static_cast<double>(*most) / static_cast<double>(*fewest) : 0.0,
              percentile(all_waits, 0.5), percentile(all_waits, 0.99));
  return counter == total;
}

}  // namespace

int main(int argc, char** argv) {
  int blocks = 10, cycles = 2000;
  double seconds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--blocks") == 0) blocks = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--cycles-per-block") == 0) cycles = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::max(0.1, std::atof(argv[i + 1]));
  }
  std::vector<std::unique_ptr<dlock::test::RedisServer>> nodes;
  for (int i = 0; i < 5; ++i) nodes.push_back(std::make_unique<dlock::test::RedisServer>());
  dlock::Config redlock_config = nodes.front()->config();
  redlock_config.redis.mode = dlock::RedisMode::redlock;
  redlock_config.redis.redlock.restarted_node_delay = std::chrono::milliseconds(0);  // fresh servers: no sit-out
  for (const auto& node : nodes) redlock_config.redis.redlock.nodes.push_back({node->host(), node->port()});
  redlock_config.logging.level = "error";
  auto single = dlock::make_lock_service(nodes.front()->config());
  auto redlock = dlock::make_lock_service(redlock_config);
  block_us_per_cycle(*single, cycles / 4);  // warm up: connections, scripts
  block_us_per_cycle(*redlock, cycles / 4);
  std::vector<double> single_us, redlock_us;
  for (int b = 0; b < blocks; ++b) {
    single_us.push_back(block_us_per_cycle(*single, cycles));
    redlock_us.push_back(block_us_per_cycle(*redlock, cycles));
  }
  const double s = median(single_us), r = median(redlock_us);
  std::printf("uncontended lock+unlock cycle, median of %d alternating blocks of %d cycles:\n", blocks, cycles);
  std::printf("  single node %.1f us/cycle, redlock (5 nodes) %.1f us/cycle, redlock/single %.3f\n", s, r, r / s);
  // The floor under those: a bare round trip (PING) to one node, and to all five at once.
  dlock::HiredisExecutor one(nodes.front()->config().redis);
  dlock::RedlockExecutor five(redlock_config.redis);
  std::vector<double> one_us, five_us;
  for (int b = 0; b < blocks; ++b) {
    one_us.push_back(block_us_per_ping(one, cycles));
    five_us.push_back(block_us_per_ping(five, cycles));
  }
  const double p1 = median(one_us), p5 = median(five_us);
  std::printf("  floor: PING round trip to one node %.1f us, to all five at once %.1f us (%.3f); a cycle is 2 round "
              "trips: redlock cycle / (2 x five-node PING) %.2f\n", p1, p5, p5 / p1, r / (2 * p5));
  return contention(*redlock, 8, seconds) ? 0 : 1;
}
