#pragma once
// The driver's faults, one at a time, each logged with CLOCK_MONOTONIC
// stamps so the checker can tell which holds they hit:
//   kill-holder    SIGKILL of a worker inside its section, then a new worker in its place
//   stop-holder    SIGSTOP of a worker inside its section for lease + 200..1000 ms, then SIGCONT
//   stop-redis     SIGSTOP of Redis for 300..2000 ms, then SIGCONT
//   restart-redis  SIGTERM or SIGKILL of Redis, 100..800 ms down, started again on the same
//                  port with the same AOF directory; or (how=forget) a restart that forgets
//                  the locks, as one without persistence would: dlock's keys are deleted,
//                  Redis is SIGKILLed and started again at once (the counter, kept, still
//                  checks every write)
//   client-kill    CLIENT KILL TYPE normal: every client connection but the driver's own
// Every fault returns with Redis running and every worker running.

#include <random>
#include <string>

#include "event_log.hpp"
#include "fleet.hpp"
#include "redis_server.hpp"

namespace dlock::history {

class FaultInjector {
 public:
  FaultInjector(dlock::test::RedisServer& redis, Fleet& fleet, EventLog& log, long long lease_ms, std::mt19937& random)
      : redis_(redis), fleet_(fleet), log_(log), lease_ms_(lease_ms), random_(random) {}

  // Injects one fault of a kind drawn at random.
  void inject_one();

 private:
  void kill_holder();
  void stop_holder();
  void stop_redis();
  void restart_redis();
  void forget_locks();
  void client_kill();
  int draw(int low, int high) { return std::uniform_int_distribution<int>(low, high)(random_); }

  dlock::test::RedisServer& redis_;
  Fleet& fleet_;
  EventLog& log_;
  long long lease_ms_;
  std::mt19937& random_;
};

}  // namespace dlock::history
