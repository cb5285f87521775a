#include "counted_cycles.hpp"

#include <stdexcept>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "lock_cycle.hpp"

namespace bench {

void run_counted_cycles(const std::string& client, const Target& target, long long count, int threads) {
  if (threads <= 1) {
    auto cycle = make_lock_cycle(client, target);
    for (long long i = 0; i < count; ++i) cycle->run();
    return;
  }
  if (client != "dlock") throw std::invalid_argument("--threads is for the dlock client only");
  auto service = dlock::make_lock_service(target.config());
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (long long i = 0; i < count; ++i) service->lock("bench:counted", {.wait = dlock::Millis(60000)}).unlock();
    });
  }
  for (auto& worker : workers) worker.join();
}

}  // namespace bench
