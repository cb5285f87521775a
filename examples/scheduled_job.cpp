// A periodic job that several instances run, where exactly one instance may
// run each round (ShedLock's use case). Each round every instance tries the
// job's lock once (WITH_DISTRIBUTED_LOCK_IF_FREE: no wait) with a fixed lease
// a little shorter than the period; the winner runs the job and detaches the
// guard, so the lock stays until its lease ends and no instance runs the job
// twice in one round, however fast the job was.
//
//   scheduled_job --config config/dlock.yaml --job nightly-report --rounds 5 --period-ms 400 --processes 3

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "example_errors.hpp"
#include "example_flags.hpp"

namespace {

const char* const kUsage =
    "usage: scheduled_job [--config FILE] [--job NAME] [--rounds R] [--period-ms P] [--processes N]\n"
    "  --config FILE     dlock YAML config (default config/dlock.yaml)\n"
    "  --job NAME        the job, locked as job:NAME (default report)\n"
    "  --rounds R        rounds to run (default 5)\n"
    "  --period-ms P     length of a round (default 400)\n"
    "  --processes N     instances to fork (default 3)\n";

using Clock = std::chrono::system_clock;

long long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

// One instance: at each round boundary, try the lock; the winner records its run.
int run_instance(const dlock::Config& config, const std::string& job, long long first_round, long long rounds,
                 long long period_ms) {
  auto service = dlock::make_lock_service(config);
  const auto redis_executor = dlock::make_executor(config.redis);
  dlock::RedisExecutor& redis = *redis_executor;
  DISTRIBUTED_LOCK_SERVICE(service);  // a free function: say which service the forms below use
  // The lease ends a little before the next round starts, so that round's winner finds the lock free.
  const dlock::Millis lease(period_ms * 8 / 10);
  for (long long round = first_round; round < first_round + rounds; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(round * period_ms - now_ms()));
    // Tries once; the instances that find it taken skip this round (lock4j's skip strategy).
    WITH_DISTRIBUTED_LOCK_IF_FREE_AS(guard, "job:{}", job, {.lease = lease}) {
      redis.command({"INCR", dlock::lock_key("runs:{}:{}", job, round)});
      std::cout << "round " << round - first_round << ": instance " << ::getpid() << " ran " << job
                << " (fencing token " << guard.fencing_token() << ")" << std::endl;
      guard.detach();  // keep the lock for the rest of the round
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  example::Flags flags(argc, argv, {"--config", "--job", "--rounds", "--period-ms", "--processes"}, {}, kUsage);
  const std::string job = flags.text("--job", "report");
  const long long rounds = flags.number("--rounds", 5, 1);
  const long long period_ms = flags.number("--period-ms", 400, 50);
  const long long processes = flags.number("--processes", 3, 1);
  return example::run_reporting_errors([&] {
    const dlock::Config config = dlock::load_config(flags.text("--config", "config/dlock.yaml"));
    // Start at a round boundary a little ahead, the same for every instance.
    const long long first_round = now_ms() / period_ms + 3;
    std::vector<pid_t> children;
    for (long long p = 0; p < processes; ++p) {
      pid_t child = ::fork();  // before this process starts any thread
      if (child < 0) throw std::runtime_error("fork failed");
      if (child == 0) std::_Exit(example::run_reporting_errors([&] {
        return run_instance(config, job, first_round, rounds, period_ms);
      }));
      children.push_back(child);
    }
    bool instances_ok = true;
    for (pid_t child : children) {
      int status = 0;
      ::waitpid(child, &status, 0);
      instances_ok = instances_ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    const auto redis_executor = dlock::make_executor(config.redis);
    dlock::RedisExecutor& redis = *redis_executor;
    long long ran_once = 0, duplicates = 0, missed = 0;
    for (long long round = first_round; round < first_round + rounds; ++round) {
      auto reply = redis.command({"GET", dlock::lock_key("runs:{}:{}", job, round)});
      const long long runs = reply.is_nil() ? 0 : std::stoll(reply.str);
      if (runs == 1) ++ran_once;
      if (runs > 1) duplicates += runs - 1;
      if (runs == 0) ++missed;
    }
    std::cout << "rounds=" << rounds << " ran_once=" << ran_once << " duplicates=" << duplicates
              << " missed=" << missed << std::endl;
    return instances_ok && duplicates == 0 ? 0 : 1;
  });
}
