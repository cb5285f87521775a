// dlock-bench-primitives: the uncontended acquire+release cycle of each
// primitive against the lock's, on one throwaway redis-server, in one run:
// a read lock, a write lock, one permit of a semaphore, and a 3-key
// multi-lock against 3 locks taken one after another. Blocks of each
// alternate (the loopback round trip changes mode within seconds, so only
// interleaved blocks compare); prints the median µs per cycle of each and
// its ratio to the lock's (the multi-lock's to the 3 sequential locks').
//
//   build/bench/dlock-bench-primitives [--blocks N] [--cycles-per-block N]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "alternating_blocks.hpp"
#include "dlock/dlock.hpp"
#include "redis_server.hpp"

namespace {

using dlock::bench::median;

// µs per cycle over one block of `cycles` runs of `cycle`.
double block_us(const std::function<void()>& cycle, int cycles) {
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < cycles; ++i) cycle();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count() / cycles;
}

struct Row {
  const char* name;
  std::function<void()> cycle;
  std::vector<double> us;
};

}  // namespace

int main(int argc, char** argv) {
  int blocks = 10, cycles = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--blocks") == 0) blocks = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--cycles-per-block") == 0) cycles = std::max(1, std::atoi(argv[i + 1]));
  }
  dlock::test::RedisServer server;
  auto service = dlock::make_lock_service(server.config());
  const dlock::Semaphore semaphore = service->semaphore("bench:permits", 4);
  const std::vector<std::string> three{"bench:m1", "bench:m2", "bench:m3"};
  std::vector<Row> rows{
      {"lock", [&] { service->lock("bench:lock").unlock(); }, {}},
      {"read lock", [&] { service->read_lock("bench:rw").unlock(); }, {}},
      {"write lock", [&] { service->write_lock("bench:rw").unlock(); }, {}},
      {"semaphore, 1 permit", [&] { semaphore.acquire().unlock(); }, {}},
      {"3 locks one by one", [&] {
         auto a = service->lock(three[0]);
         auto b = service->lock(three[1]);
         auto c = service->lock(three[2]);
         c.unlock();
         b.unlock();
         a.unlock();
       }, {}},
      {"multi-lock of 3 keys", [&] { service->lock_all(three).unlock(); }, {}},
  };
  for (Row& row : rows) block_us(row.cycle, cycles / 4);  // warm up: connections, scripts
  for (int b = 0; b < blocks; ++b) {
    for (Row& row : rows) row.us.push_back(block_us(row.cycle, cycles));
  }
  std::printf("uncontended acquire+release cycle, median of %d alternating blocks of %d cycles:\n", blocks, cycles);
  const double lock_us = median(rows[0].us), three_us = median(rows[4].us);
  for (const Row& row : rows) {
    const double us = median(row.us);
    const bool multi = std::strcmp(row.name, "multi-lock of 3 keys") == 0;
    std::printf("  %-22s %7.1f us/cycle  %5.2fx the %s\n", row.name, us, us / (multi ? three_us : lock_us),
                multi ? "3 locks one by one" : "lock");
  }
  return 0;
}
