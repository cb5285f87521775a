// Parts 1-3: the floors (round trip, ideal acquire+release) and dlock's
// uncontended and re-entrant cycles, measured in interleaved blocks because
// this machine's round trip jumps between modes within seconds.
#include <functional>

#include "bench_target.hpp"
#include "dlock/dlock.hpp"
#include "ideal_client.hpp"

namespace bench {
namespace {

constexpr long long kLeaseMs = 30000;

void time_block(Samples& samples, int count, const std::function<void()>& op) {
  for (int i = 0; i < count; ++i) {
    const auto start = Clock::now();
    op();
    samples.add(Clock::now() - start);
  }
}

}  // namespace

Floors run_uncontended(Report& report, const Target& target) {
  IdealClient ideal(target.host, target.port);
  auto service = dlock::make_lock_service(target.config());
  const int rounds = target.quick ? 4 : 30;
  const int block = target.quick ? 100 : 400;
  const std::string ideal_key = "dlock:{bench:ideal}";
  const std::string ideal_nested_key = "dlock:{bench:ideal-nested}";
  const std::string ideal_owner = "ideal:1";

  Samples rtt, two_rtt, ideal_cycle, watchdog_cycle, raii_cycle, fixed_cycle, ideal_nested, dlock_nested;
  Samples permit_cycle, write_cycle;
  const dlock::Semaphore permits = service->semaphore("bench:permits", 1);
  ideal.acquire(ideal_nested_key, ideal_owner, kLeaseMs);
  auto outer = service->lock("bench:nested");
  for (int round = 0; round < rounds; ++round) {
    time_block(rtt, block, [&] { ideal.round_trip(); });
    time_block(two_rtt, block, [&] {
      ideal.round_trip();
      ideal.round_trip();
    });
    time_block(ideal_cycle, block, [&] {
      ideal.acquire(ideal_key, ideal_owner, kLeaseMs);
      ideal.release(ideal_key, ideal_owner);
    });
    time_block(watchdog_cycle, block, [&] { service->lock("bench:watchdog").unlock(); });
    // As a user writes it: the guard's destructor sends the release and does not wait for its reply.
    time_block(raii_cycle, block, [&] { auto guard = service->lock("bench:raii"); });
    time_block(fixed_cycle, block, [&] { service->lock("bench:fixed", {.lease = dlock::Millis(kLeaseMs)}).unlock(); });
    // The semaphore's and the read-write lock's holds, released as a lock's (their releases off the path too).
    time_block(permit_cycle, block, [&] { auto permit = permits.acquire(); });
    time_block(write_cycle, block, [&] { auto guard = service->write_lock("bench:rw"); });
    time_block(ideal_nested, block, [&] {
      ideal.set_holds(ideal_nested_key, ideal_owner, kLeaseMs, 2);
      ideal.set_holds(ideal_nested_key, ideal_owner, kLeaseMs, 1);
    });
    time_block(dlock_nested, block, [&] { service->lock("bench:nested").unlock(); });
  }
  outer.unlock();
  ideal.release(ideal_nested_key, ideal_owner);

  report.section("floors and uncontended cycles (interleaved blocks)");
  report.latency("RTT (EVALSHA return 1)", rtt);
  report.latency("ideal acquire+release", ideal_cycle);
  report.latency("two round trips (2 x EVALSHA return 1)", two_rtt);
  report.latency("dlock lock+unlock, watchdog lease", watchdog_cycle);
  report.latency("dlock RAII cycle { auto g = lock(k); }", raii_cycle);
  report.latency("dlock lock+unlock, fixed lease", fixed_cycle);
  report.latency("dlock permit RAII cycle { auto p = semaphore.acquire(); }", permit_cycle);
  report.latency("dlock write-lock RAII cycle { auto g = write_lock(k); }", write_cycle);
  report.latency("ideal nested acquire+release", ideal_nested);
  report.latency("dlock nested lock+unlock", dlock_nested);
  const double ideal_p50 = ideal_cycle.percentile_us(500);
  report.figure("ratio watchdog cycle / ideal (p50)", watchdog_cycle.percentile_us(500) / ideal_p50, "x", "target <= 1.10");
  report.figure("ratio RAII cycle / two round trips (p50)", raii_cycle.percentile_us(500) / two_rtt.percentile_us(500),
                "x", "target <= 0.80");
  report.figure("ratio RAII cycle / ideal awaited acquire+release (p50)", raii_cycle.percentile_us(500) / ideal_p50,
                "x", "target <= 0.80");
  report.figure("ratio permit RAII cycle / two round trips (p50)",
                permit_cycle.percentile_us(500) / two_rtt.percentile_us(500), "x", "as the lock's");
  report.figure("ratio write-lock RAII cycle / two round trips (p50)",
                write_cycle.percentile_us(500) / two_rtt.percentile_us(500), "x", "as the lock's");
  report.figure("ratio fixed cycle / ideal (p50)", fixed_cycle.percentile_us(500) / ideal_p50, "x", "target <= 1.10");
  report.figure("ratio nested / ideal nested (p50)",
                dlock_nested.percentile_us(500) / ideal_nested.percentile_us(500), "x", "target <= 1.10");
  return Floors{rtt.percentile_us(500), ideal_p50, watchdog_cycle.percentile_us(500)};
}

}  // namespace bench
