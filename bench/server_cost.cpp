// Part 2: what a lock costs the server every service shares. Redis runs
// commands on one core, so its time per lock cycle bounds a whole fleet's
// lock throughput. Measured from the server's side (INFO commandstats and
// INFO cpu, differences over blocks of cycles, blocks of the clients
// alternating), against two reference clients: the minimal reentrant hash
// lock pair and a bare SET NX PX lock (minimal_pair_client.hpp, bare_client.hpp).
#include <algorithm>
#include <functional>

#include "bench_target.hpp"
#include "dlock/dlock.hpp"
#include "ideal_client.hpp"
#include "bare_client.hpp"
#include "minimal_pair_client.hpp"
#include "server_stats.hpp"

namespace bench {
namespace {

constexpr long long kLeaseMs = 30000;

// Per-operation figures of one kind of block, one entry per round.
struct Cost {
  std::vector<double> script_us;  // time inside the top-level commands named
  std::vector<double> cpu_us;     // the server process' whole CPU time

  double median(std::vector<double> values) const {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
  }
  double script() const { return median(script_us); }
  double cpu() const { return median(cpu_us); }
};

class Meter {
 public:
  explicit Meter(const Target& target) : stats_(target.host, target.port) {}

  // Runs `op` count times and adds the server's time per op to `cost`.
  void measure(Cost& cost, int count, std::initializer_list<const char*> commands, const std::function<void(int)>& op) {
    const ServerSnapshot before = stats_.snapshot();
    for (int i = 0; i < count; ++i) op(i);
    const ServerSnapshot delta = stats_.snapshot().since(before);
    cost.script_us.push_back(static_cast<double>(delta.usec_in(commands)) / count);
    cost.cpu_us.push_back(delta.cpu_seconds * 1e6 / count);
  }

 private:
  ServerStats stats_;
};

std::string numbered(const char* stem, int i) { return std::string(stem) + std::to_string(i) + "}"; }

}  // namespace

ServerCycleCost run_server_cost(Report& report, const Target& target) {
  const int count = target.quick ? 1000 : 10000;
  const int rounds = target.quick ? 1 : 5;
  auto service = dlock::make_lock_service(target.config());
  IdealClient ideal(target.host, target.port);
  MinimalPairClient minimal(target.host, target.port);
  BareClient bare(target.host, target.port);
  Meter meter(target);

  Cost dlock_cycle, minimal_cycle, bare_cycle, dlock_acquire, dlock_release, dlock_renew, minimal_acquire,
      minimal_release;
  const std::string owner = "server-cost:1";
  // The per-script blocks use `count` locks of their own; one cycle on each
  // first, so that their fencing counters exist, as they do for a lock in use.
  for (int i = 0; i < count; ++i) {
    ideal.acquire(numbered("dlock:{bench:script:", i), owner, kLeaseMs);
    ideal.release(numbered("dlock:{bench:script:", i), owner);
  }
  for (int round = 0; round < rounds; ++round) {
    meter.measure(dlock_cycle, count, {"evalsha"}, [&](int) { service->lock("bench:server-cost").unlock(); });
    meter.measure(minimal_cycle, count, {"evalsha"}, [&](int) {
      minimal.acquire("bench:minimal", "bench:minimal:fence", owner, kLeaseMs);
      minimal.release("bench:minimal", "bench:minimal:released", owner, kLeaseMs);
    });
    meter.measure(bare_cycle, count, {"set", "evalsha"}, [&](int) {
      bare.acquire("bench:bare", kLeaseMs);
      bare.release("bench:bare");
    });
    // One script at a time: acquires of `count` free locks, then their releases.
    meter.measure(dlock_acquire, count, {"evalsha"},
                  [&](int i) { ideal.acquire(numbered("dlock:{bench:script:", i), owner, kLeaseMs); });
    meter.measure(dlock_renew, count, {"evalsha"},
                  [&](int i) { ideal.set_holds(numbered("dlock:{bench:script:", i), owner, kLeaseMs, 2); });
    meter.measure(dlock_release, count, {"evalsha"},
                  [&](int i) { ideal.release(numbered("dlock:{bench:script:", i), owner); });
    meter.measure(minimal_acquire, count, {"evalsha"}, [&](int i) {
      minimal.acquire(numbered("{bench:minimal:", i), numbered("{bench:minimal:", i) + ":fence", owner, kLeaseMs);
    });
    meter.measure(minimal_release, count, {"evalsha"}, [&](int i) {
      minimal.release(numbered("{bench:minimal:", i), numbered("{bench:minimal:", i) + ":released", owner, kLeaseMs);
    });
  }

  report.section("server time per uncontended lock+unlock (INFO commandstats / cpu, median of " +
                 std::to_string(rounds) + " blocks of " + std::to_string(count) + ")");
  report.figure("dlock cycle: script time", dlock_cycle.script(), "us");
  report.figure("dlock cycle: server CPU", dlock_cycle.cpu(), "us");
  report.figure("minimal pair cycle: script time", minimal_cycle.script(), "us");
  report.figure("minimal pair cycle: server CPU", minimal_cycle.cpu(), "us");
  report.figure("bare SET NX PX cycle: command time", bare_cycle.script(), "us");
  report.figure("bare SET NX PX cycle: server CPU", bare_cycle.cpu(), "us");
  report.figure("ratio script time dlock / minimal pair", dlock_cycle.script() / minimal_cycle.script(), "x",
                "target <= 1.3");
  report.figure("ratio server CPU dlock / minimal pair", dlock_cycle.cpu() / minimal_cycle.cpu(), "x",
                "target <= 1.1");
  report.figure("ratio server CPU dlock / bare", dlock_cycle.cpu() / bare_cycle.cpu(), "x");
  report.figure("dlock acquire script (free lock)", dlock_acquire.script(), "us");
  report.figure("dlock release script (nobody waiting)", dlock_release.script(), "us");
  report.figure("dlock renew script (re-entry, count set)", dlock_renew.script(), "us");
  report.figure("minimal pair acquire script (free lock)", minimal_acquire.script(), "us");
  report.figure("minimal pair release script", minimal_release.script(), "us");
  return ServerCycleCost{dlock_cycle.script(), dlock_cycle.cpu()};
}

}  // namespace bench
