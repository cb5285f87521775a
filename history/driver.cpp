// The history driver: starts a Redis that persists every write (AOF,
// appendfsync always, in a temporary directory), N history workers on one
// lock, and injects faults (faults.hpp) on a seeded random schedule, one
// every 1–3 s; logs it all to DIR/driver.log next to the workers' DIR/w<N>.log.
// history_check DIR then judges the record.
//
//   history_driver --dir DIR [--seconds 60] [--workers 5] [--seed 1] [--lease-ms 1000]
//                  [--fault-min-ms 1000] [--fault-max-ms 3000] [--worker-bin PATH]
//
// Every process it starts (Redis, workers) it stops by its pid before it
// exits, also on SIGINT/SIGTERM. Exit 0 once the record is complete; 1 if
// something failed on the way (Redis would not restart, ...); 64 bad usage.
#include <csignal>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

#include "example_flags.hpp"
#include "faults.hpp"
#include "fleet.hpp"

using namespace std::chrono_literals;

namespace {

std::atomic<bool> interrupted{false};
extern "C" void on_signal(int) { interrupted = true; }

constexpr const char* kCounterKey = "history:counter";

// Sleeps until `until`, in short steps so an interrupt is seen at once.
void sleep_until(std::chrono::steady_clock::time_point until) {
  while (!interrupted && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(20ms);
}

// The counter once every worker is gone; a freshly restarted Redis may still
// be loading its AOF, so it is asked again for up to 10 s.
std::string read_final_counter(const dlock::test::RedisServer& redis) {
  std::string last;
  for (int attempt = 0; attempt < 100; ++attempt) {
    try {
      last = redis.run({"GET", kCounterKey});
      if (last == "(nil)") return "0";
      if (!last.empty() && last.find_first_not_of("0123456789") == std::string::npos) return last;
    } catch (const std::exception& e) {
      last = e.what();
    }
    std::this_thread::sleep_for(100ms);
  }
  throw std::runtime_error("cannot read " + std::string(kCounterKey) + " at the end: " + last);
}

}  // namespace

int main(int argc, char** argv) {
  const example::Flags flags(
      argc, argv,
      {"--dir", "--seconds", "--workers", "--seed", "--lease-ms", "--fault-min-ms", "--fault-max-ms", "--worker-bin"},
      {},
      "usage: history_driver --dir DIR [--seconds 60] [--workers 5] [--seed 1] [--lease-ms 1000]\n"
      "                      [--fault-min-ms 1000] [--fault-max-ms 3000] [--worker-bin PATH]\n");
  const std::filesystem::path dir = flags.text("--dir", "");
  const long long seconds = flags.number("--seconds", 60, 1);
  const long long seed = flags.number("--seed", 1, 0);
  const long long fault_min_ms = flags.number("--fault-min-ms", 1000, 1);
  const long long fault_max_ms = flags.number("--fault-max-ms", 3000, fault_min_ms);
  if (dir.empty()) {
    std::cerr << "history_driver: --dir is required\n";
    return 64;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::filesystem::create_directories(dir);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".log") std::filesystem::remove(entry.path());  // a record of one run only
  }

  dlock::history::EventLog log(dir / "driver.log", "driver");
  dlock::history::FleetOptions options{.worker_bin = flags.text("--worker-bin", HISTORY_WORKER_BIN),
                                       .dir = dir,
                                       .workers = static_cast<int>(flags.number("--workers", 5, 1)),
                                       .port = 0,
                                       .lease_ms = flags.number("--lease-ms", 1000, 10),
                                       .seed = static_cast<unsigned>(seed),
                                       .max_seconds = seconds + 60};
  log.append("config", {{"seed", std::to_string(seed)},
                        {"workers", std::to_string(options.workers)},
                        {"lease_ms", std::to_string(options.lease_ms)},
                        {"seconds", std::to_string(seconds)}});
  try {
    dlock::test::RedisServer redis({"--appendonly", "yes", "--appendfsync", "always"});
    log.append("redis-up", {{"pid", std::to_string(redis.pid())}, {"port", std::to_string(redis.port())}});
    options.port = redis.port();
    std::mt19937 random(static_cast<unsigned>(seed));
    int faults = 0;
    {
      dlock::history::Fleet fleet(options, log);
      dlock::history::FaultInjector injector(redis, fleet, log, options.lease_ms, random);
      std::uniform_int_distribution<long long> gap_ms(fault_min_ms, fault_max_ms);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
      for (int round = 0; round < 100000 && !interrupted; ++round) {
        sleep_until(std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(gap_ms(random))));
        if (interrupted || std::chrono::steady_clock::now() >= deadline) break;
        injector.inject_one();
        ++faults;
      }
      fleet.stop_all(10s);
    }
    log.append("final", {{"counter", read_final_counter(redis)}});
    redis.stop();
    std::cout << "history_driver: seed " << seed << ", " << options.workers << " workers, " << faults
              << " faults drawn, record in " << dir.string() << "\n";
    return interrupted ? 1 : 0;
  } catch (const std::exception& e) {
    log.append("abort", {}, e.what());
    std::cerr << "history_driver: " << e.what() << "\n";
    return 1;
  }
}
