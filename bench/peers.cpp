// Part 7: the C++ side of the peers comparison. Uncontended lock+unlock
// cycles per second, one thread, one key per client, in alternating blocks
// (the round trip changes mode within seconds, so every client gets a block
// in every round, and each ratio to the bare client is the median of the
// rounds' own ratios). bench/peers/run.sh adds node-redlock and redis-py's Lock.
#include <algorithm>
#include <map>

#include "bench_target.hpp"
#include "lock_cycle.hpp"

namespace bench {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

bool run_peers(Report& report, const Target& target) {
  const int rounds = target.quick ? 2 : 10;  // as bench/peers/run.sh: short rounds ride out mode changes
  const double block_seconds = target.quick ? 0.1 : 0.5;
  std::map<std::string, std::unique_ptr<LockCycle>> cycles;
  std::map<std::string, std::vector<double>> rates;
  for (const auto& name : lock_cycle_names()) cycles[name] = make_lock_cycle(name, target);
  for (int round = 0; round < rounds; ++round) {
    for (const auto& name : lock_cycle_names()) rates[name].push_back(cycles_per_second(*cycles[name], block_seconds));
  }

  report.section("peers: uncontended lock+unlock, 1 thread, 1 key (median of " + std::to_string(rounds) +
                 " alternating blocks)");
  for (const auto& name : lock_cycle_names()) report.figure(name + " cycles/s", median(rates[name]), "cycles/s");
  // Ratios round by round, so that rounds in another mode of the round trip cannot skew them.
  const std::vector<double>& bare = rates["bare"];
  for (const auto& name : lock_cycle_names()) {
    if (name == "bare") continue;
    std::vector<double> ratios;
    for (int round = 0; round < rounds; ++round) ratios.push_back(rates[name][round] / bare[round]);
    report.figure("ratio " + name + " / bare (cycles/s)", median(ratios), "x",
                  name == "dlock" ? "target >= 0.952 (cycle within 1.05x bare)" : "");
  }
  return true;
}

}  // namespace bench
