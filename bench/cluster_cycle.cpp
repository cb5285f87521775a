// dlock-bench-cluster: the uncontended lock+unlock cycle in cluster mode
// against standalone, on the same machine, in one run. Starts a throwaway
// 3-master Redis Cluster and a throwaway standalone redis-server, then times
// alternating blocks of cycles on each (the loopback round trip changes mode
// within seconds, so only figures from interleaved blocks compare), and
// prints the median µs per cycle of each and their ratio.
//
//   build/bench/dlock-bench-cluster [--blocks N] [--cycles-per-block N]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dlock/dlock.hpp"
#include "redis_cluster.hpp"
#include "redis_server.hpp"
#include "alternating_blocks.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using dlock::bench::block_us_per_cycle;
using dlock::bench::median;

}  // namespace

int main(int argc, char** argv) {
  int blocks = 10, cycles = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--blocks") == 0) blocks = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--cycles-per-block") == 0) cycles = std::max(1, std::atoi(argv[i + 1]));
  }
  dlock::test::RedisServer standalone_server;
  dlock::test::RedisCluster cluster(3, 0);
  auto standalone = dlock::make_lock_service(standalone_server.config());
  auto clustered = dlock::make_lock_service(cluster.config());
  block_us_per_cycle(*standalone, cycles / 4);  // warm up: connections, scripts
  block_us_per_cycle(*clustered, cycles / 4);
  std::vector<double> standalone_us, cluster_us;
  for (int b = 0; b < blocks; ++b) {
    standalone_us.push_back(block_us_per_cycle(*standalone, cycles));
    cluster_us.push_back(block_us_per_cycle(*clustered, cycles));
  }
  const double s = median(standalone_us), c = median(cluster_us);
  std::printf("uncontended lock+unlock cycle, median of %d alternating blocks of %d cycles:\n", blocks, cycles);
  std::printf("  standalone %.1f us/cycle, cluster (3 masters) %.1f us/cycle, cluster/standalone %.3f\n", s, c, c / s);
  return 0;
}
