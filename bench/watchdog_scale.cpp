// Part 5: one service holding many locks at once under a short watchdog
// lease for several lease periods: nothing may be lost, the service's thread
// count must not grow with the locks, and renewals must be pipelined.
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "bench_target.hpp"
#include "dlock/dlock.hpp"
#include "raw_connection.hpp"

namespace bench {
namespace {

std::size_t thread_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

double resident_kib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (::sysconf(_SC_PAGESIZE) / 1024.0);
}

// used_memory of INFO memory, in bytes.
double redis_used_memory(RawConnection& redis) {
  const char* argv[] = {"INFO", "memory"};
  const std::size_t lens[] = {4, 6};
  const Reply reply = redis.call(2, argv, lens);
  const std::string text(reply->str, reply->len);
  const std::string field = "used_memory:";
  const auto at = text.find(field);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + field.size()));
}

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace

bool run_watchdog_scale(Report& report, const Target& target) {
  const int locks = target.held > 0 ? target.held : target.quick ? 1000 : 10000;
  // Renewed every third of a lease: past 100,000 locks, the default 30 s lease keeps
  // Redis' share of the renewals (a million locks: 100,000 a second) within one core.
  const int lease_ms = locks > 100000 ? 30000 : 3000;
  const int periods = target.quick ? 1 : 3;
  dlock::Config config = target.config();
  config.lock.watchdog_timeout = dlock::Millis(lease_ms);

  const std::size_t threads_before = thread_count();
  auto service = dlock::make_lock_service(config);
  {  // one contended wait, so the subscriber's thread is running too
    auto holder = dlock::make_lock_service(config);
    auto held = holder->lock("bench:scale:busy");
    service->try_lock("bench:scale:busy", {.wait = dlock::Millis(20)});
  }
  std::vector<dlock::LockGuard> guards;
  guards.reserve(static_cast<std::size_t>(locks));
  RawConnection redis(target.host, target.port);
  const double redis_before = redis_used_memory(redis);
  const double rss_before = resident_kib();
  const auto acquire_start = Clock::now();
  for (int i = 0; i < locks; ++i) guards.push_back(service->lock("bench:scale:" + std::to_string(i)));
  const double acquire_seconds = std::chrono::duration<double>(Clock::now() - acquire_start).count();
  const double rss_after = resident_kib();
  const double redis_after = redis_used_memory(redis);
  const auto stats_before = service->stats();
  const double cpu_before = cpu_seconds();
  const auto idle_start = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(lease_ms * periods + lease_ms / 2));
  const double idle_seconds = std::chrono::duration<double>(Clock::now() - idle_start).count();
  const double cpu_used = cpu_seconds() - cpu_before;
  const auto stats_after = service->stats();
  const std::size_t threads_started = thread_count() - threads_before;

  std::size_t lost = 0;
  for (const auto& guard : guards) lost += guard.lost() ? 1 : 0;
  const auto rounds = stats_after.renewal_rounds - stats_before.renewal_rounds;
  const auto renewals = stats_after.renewals_sent - stats_before.renewals_sent;
  // Every guard's destructor sends its release; the last replies are read by the service's end.
  const auto release_start = Clock::now();
  guards.clear();
  service.reset();
  const double release_seconds = std::chrono::duration<double>(Clock::now() - release_start).count();

  report.section("watchdog at scale: " + std::to_string(locks) + " locks held, lease " + std::to_string(lease_ms) +
                 " ms, " + std::to_string(periods) + " period(s)");
  report.figure("locks lost", static_cast<double>(lost + (stats_after.lost - stats_before.lost)), "", "target 0");
  // The service's fixed set (the watchdog's two, the subscriber, the line keeper's I/O and timer threads,
  // which the warm-up's wait starts, ...): the same at any count, none per lock.
  report.figure("threads started by the service", static_cast<double>(threads_started), "", "target: not per lock");
  report.figure("renewals sent", static_cast<double>(renewals), "");
  report.figure("renewal round trips", static_cast<double>(rounds), "");
  report.figure("renewals per round trip", rounds ? static_cast<double>(renewals) / rounds : 0, "");
  report.figure("process CPU while holding", 100 * cpu_used / idle_seconds, "% core", "target < 10 %");
  report.figure("resident memory per held lock", (rss_after - rss_before) * 1024 / locks, "bytes", "target < 1024");
  report.figure("Redis memory per held lock", (redis_after - redis_before) / locks, "bytes");
  report.figure("locks acquired per second (one thread)", locks / acquire_seconds, "/s");
  report.figure("locks released per second (destructors, then the service's end)", locks / release_seconds, "/s",
                "target >= 10,000");
  return lost == 0 && renewals >= static_cast<std::uint64_t>(locks) * periods;
}

}  // namespace bench
