#pragma once
// What every part of the benchmark needs: where Redis is, how long to run,
// and where the figures go.

#include <string>

#include "dlock/config.hpp"
#include "report.hpp"

namespace bench {

struct Target {
  std::string host;
  int port = 0;
  bool quick = false;
  std::string self_path;  // this binary, to start worker processes
  double async_seconds = 0;  // the async part's workloads A and B, each run; 0: its default (5 s, --quick 1 s)
  int async_waiters = 0;     // the async part's workload C; 0: its default (10,000, --quick 1,000)
  int held = 0;              // the watchdog part's locks held at once (--held); 0: 10,000 (--quick 1,000)

  // A quiet config for services under test.
  dlock::Config config() const {
    dlock::Config config;
    config.redis.host = host;
    config.redis.port = port;
    config.redis.command_timeout = dlock::Millis(5000);
    config.logging.level = "warn";
    return config;
  }
};

// Floors measured by the uncontended part, used as the yardstick of the others.
struct Floors {
  double rtt_p50_us = 0;
  double ideal_cycle_p50_us = 0;
  double dlock_cycle_p50_us = 0;
};

// What an uncontended dlock cycle costs the server (run_server_cost), the
// yardstick of the contended hand-off's server time.
struct ServerCycleCost {
  double script_us = 0;
  double cpu_us = 0;
};

// Each part returns false when a correctness check failed (a counter not
// exact, a lock lost): the benchmark then exits non-zero.
Floors run_uncontended(Report& report, const Target& target);
ServerCycleCost run_server_cost(Report& report, const Target& target);
bool run_contention(Report& report, const Target& target, const Floors& floors, const ServerCycleCost& server);
bool run_watchdog_scale(Report& report, const Target& target);
bool run_many_keys(Report& report, const Target& target);
bool run_peers(Report& report, const Target& target);
bool run_tls(Report& report, const Target& target);  // starts servers of its own, TLS and plaintext
bool run_async(Report& report, const Target& target, const Floors& floors);  // the async API (<dlock/asio.hpp>): coroutines on one io thread

// The body of a contention worker process (started by run_contention).
int contention_worker_main(int argc, char** argv);
// The second process of the async part's workload B (started by run_async).
int async_contender_main(int argc, char** argv);

}  // namespace bench
