// Part 4: many workers on ONE key, each holder doing a non-atomic GET/SET
// increment. Reports the tail and the spread, not just the median: a client
// that lets the releaser re-grab its own lock posts a fine p50 while its
// waiters starve.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include "alternating_blocks.hpp"
#include "bench_target.hpp"
#include "dlock/dlock.hpp"
#include "ideal_client.hpp"
#include "server_stats.hpp"

namespace bench {
namespace {

const char* const kKey = "bench:contended";
const char* const kCounter = "bench:contended:counter";

struct Acquisition {
  std::int64_t acquired_ns = 0;  // lock() returned
  std::int64_t released_ns = 0;  // unlock() called
  std::int64_t wait_ns = 0;      // lock() called → returned
  int worker = 0;
};

std::int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// Runs `threads` workers of one service until `until_ns` (steady clock, shared by all processes on this machine).
std::vector<Acquisition> run_workers(const Target& target, int threads, int first_worker, std::int64_t start_ns,
                                     std::int64_t until_ns) {
  auto service = dlock::make_lock_service(target.config());
  std::vector<std::vector<Acquisition>> per_thread(static_cast<std::size_t>(threads));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      IdealClient data(target.host, target.port);
      auto& mine = per_thread[static_cast<std::size_t>(t)];
      while (now_ns() < start_ns) std::this_thread::sleep_for(std::chrono::microseconds(200));
      while (now_ns() < until_ns) {
        Acquisition a;
        a.worker = first_worker + t;
        const std::int64_t called = now_ns();
        auto guard = service->lock(kKey, {.wait = dlock::Millis(60000)});
        a.acquired_ns = now_ns();
        a.wait_ns = a.acquired_ns - called;
        data.increment(kCounter);
        a.released_ns = now_ns();
        guard.unlock();
        mine.push_back(a);
      }
    });
  }
  for (auto& w : workers) w.join();
  std::vector<Acquisition> all;
  for (auto& v : per_thread) all.insert(all.end(), v.begin(), v.end());
  return all;
}

bool analyse(Report& report, const std::string& label, std::vector<Acquisition> all, long long counter, double seconds,
             int workers, const Floors& floors) {
  std::sort(all.begin(), all.end(), [](const Acquisition& a, const Acquisition& b) { return a.acquired_ns < b.acquired_ns; });
  Samples waits, gaps;
  std::size_t changed_hands = 0;
  bool overlap = false;
  std::map<int, std::size_t> per_worker;
  for (std::size_t i = 0; i < all.size(); ++i) {
    waits.add_ns(all[i].wait_ns);
    per_worker[all[i].worker]++;
    if (i == 0) continue;
    gaps.add_ns(all[i].acquired_ns - all[i - 1].released_ns);
    if (all[i].acquired_ns < all[i - 1].released_ns) overlap = true;
    if (all[i].worker != all[i - 1].worker) ++changed_hands;
  }
  // The critical sections alone: a waiter behind the other workers waits at
  // least through their holds (GET+SET), which no lock client can shorten.
  // Their sums over that many acquisitions in a row give the wait's floor.
  Samples holds_ahead;
  const std::size_t ahead = static_cast<std::size_t>(workers - 1);
  std::int64_t window = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    window += all[i].released_ns - all[i].acquired_ns;
    if (i >= ahead) window -= all[i - ahead].released_ns - all[i - ahead].acquired_ns;
    if (i + 1 >= ahead) holds_ahead.add_ns(window);
  }
  std::size_t least = all.empty() ? 0 : SIZE_MAX, most = 0;
  for (int w = 0; w < workers; ++w) {
    least = std::min(least, per_worker[w]);
    most = std::max(most, per_worker[w]);
  }
  const bool exact = counter == static_cast<long long>(all.size());
  const double rate = all.size() / seconds;
  report.section("contention: " + label + " on one key, GET/SET inside");
  report.figure("acquisitions per second", rate, "ops/s");
  report.figure("  vs uncontended single-thread cycle rate", rate * floors.dlock_cycle_p50_us / 1e6 * 100, "%",
                "target >= 35 %");
  report.figure("time-to-acquire p50", waits.percentile_us(500), "us");
  report.figure("time-to-acquire p99", waits.percentile_us(990), "us");
  report.figure("time-to-acquire p99.9", waits.percentile_us(999), "us");
  report.figure("time-to-acquire max", waits.percentile_us(1000), "us");
  report.figure("  p99.9 in RTTs", waits.percentile_us(999) / floors.rtt_p50_us, "RTT", "target <= 100");
  report.figure("  floor: p99.9 of " + std::to_string(ahead) + " critical sections in a row",
                holds_ahead.percentile_us(999) / floors.rtt_p50_us, "RTT", "their GET+SET alone, no lock");
  report.figure("hand-off gap p50", gaps.percentile_us(500), "us");
  report.figure("hand-off gap p99", gaps.percentile_us(990), "us");
  report.figure("  gap p50 in RTTs", gaps.percentile_us(500) / floors.rtt_p50_us, "RTT", "target <= 3");
  report.figure("share that changed hands", all.empty() ? 0 : 100.0 * changed_hands / (all.size() - 1), "%");
  report.figure("acquisitions per worker, min", static_cast<double>(least), "");
  report.figure("acquisitions per worker, max", static_cast<double>(most), "");
  report.figure("  max/min", least ? static_cast<double>(most) / least : 0, "x", "target <= 2");
  report.figure("counter exact (mutual exclusion)", exact && !overlap ? 1 : 0, "bool",
                "counter " + std::to_string(counter) + " for " + std::to_string(all.size()) + " acquisitions");
  return exact && !overlap && least > 0;
}

// Throughput against threads: 1 to 16 threads of one service on the key,
// for bench/plot.sh's throughput curve. Short runs of every thread count
// in rounds, the first count moving on by one per round, as the other
// parts alternate their blocks: this machine's round trip changes mode
// within seconds, and one long run per count would measure the mode it
// fell in. A section per thread count, its "threads" figure first, so the
// JSON lines say which run a rate belongs to; the median round's rate and
// the slowest and fastest round's.
bool run_thread_sweep(Report& report, const Target& target, IdealClient& data) {
  const std::vector<int> thread_counts = {1, 2, 4, 8, 16};
  const int rounds = target.quick ? 1 : 5;
  const double seconds = target.quick ? 0.2 : 0.5;
  std::map<int, std::vector<double>> rates;
  std::map<int, Samples> waits;
  bool ok = true;
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t step = 0; step < thread_counts.size(); ++step) {
      const int threads = thread_counts[(round + step) % thread_counts.size()];
      const long long before = data.get(kCounter);
      const std::int64_t start = now_ns() + 200'000'000;
      auto records = run_workers(target, threads, 0, start, start + static_cast<std::int64_t>(seconds * 1e9));
      ok &= data.get(kCounter) - before == static_cast<long long>(records.size()) && !records.empty();
      rates[threads].push_back(records.size() / seconds);
      for (const auto& a : records) waits[threads].add_ns(a.wait_ns);
    }
  }
  for (int threads : thread_counts) {
    auto& r = rates[threads];
    std::sort(r.begin(), r.end());
    report.section("contention sweep: " + std::to_string(threads) + " threads x 1 process");
    report.figure("threads", threads, "");
    report.figure("acquisitions per second", dlock::bench::median(r), "ops/s",
                  "median of " + std::to_string(rounds) + " rounds");
    report.figure("acquisitions per second, slowest round", r.front(), "ops/s");
    report.figure("acquisitions per second, fastest round", r.back(), "ops/s");
    report.figure("time-to-acquire p50", waits[threads].percentile_us(500), "us");
    report.figure("time-to-acquire p99", waits[threads].percentile_us(990), "us");
  }
  report.figure("counter exact (mutual exclusion)", ok ? 1 : 0, "bool", "every round of every thread count");
  return ok;
}

}  // namespace

int contention_worker_main(int argc, char** argv) {
  // --worker HOST PORT THREADS FIRST_WORKER START_NS UNTIL_NS OUT_FILE
  if (argc != 9) return 64;
  Target target;
  target.host = argv[2];
  target.port = std::stoi(argv[3]);
  auto records = run_workers(target, std::stoi(argv[4]), std::stoi(argv[5]), std::stoll(argv[6]), std::stoll(argv[7]));
  std::ofstream out(argv[8]);
  for (const auto& a : records) out << a.acquired_ns << ' ' << a.released_ns << ' ' << a.wait_ns << ' ' << a.worker << '\n';
  return out ? 0 : 1;
}

bool run_contention(Report& report, const Target& target, const Floors& floors, const ServerCycleCost& server) {
  const double seconds = target.quick ? 1.5 : 8.0;
  bool ok = true;
  IdealClient data(target.host, target.port);
  ServerStats stats(target.host, target.port);

  {  // 8 threads, one process
    const long long before = data.get(kCounter);
    const std::int64_t start = now_ns() + 200'000'000;
    const ServerSnapshot server_before = stats.snapshot();
    auto records = run_workers(target, 8, 0, start, start + static_cast<std::int64_t>(seconds * 1e9));
    const ServerSnapshot spent = stats.snapshot().since(server_before);
    ok &= analyse(report, "8 threads x 1 process", records, data.get(kCounter) - before, seconds, 8, floors);
    // Every script the hand-offs took (waiters' tries, releases, renewals), per acquisition.
    const double script_us = records.empty() ? 0 : static_cast<double>(spent.usec_in({"evalsha"})) / records.size();
    report.figure("server script time per acquisition", script_us, "us",
                  std::to_string(spent.calls_of("evalsha")) + " scripts for " + std::to_string(records.size()));
    report.figure("  vs uncontended cycle's", server.script_us > 0 ? script_us / server.script_us : 0, "x",
                  "target <= 2");
  }
  {  // 4 processes x 4 threads: worker processes are this binary started again, so no fork of a threaded process
    const long long before = data.get(kCounter);
    const std::int64_t start = now_ns() + 1'000'000'000;  // let every process connect first
    const std::int64_t until = start + static_cast<std::int64_t>(seconds * 1e9);
    std::vector<pid_t> children;
    std::vector<std::string> files;
    for (int p = 0; p < 4; ++p) {
      files.push_back("/tmp/dlock-bench-worker-" + std::to_string(::getpid()) + "-" + std::to_string(p));
      pid_t child = ::fork();
      if (child == 0) {
        std::string port = std::to_string(target.port), first = std::to_string(p * 4), s = std::to_string(start),
                    u = std::to_string(until);
        ::execl(target.self_path.c_str(), target.self_path.c_str(), "--worker", target.host.c_str(), port.c_str(), "4",
                first.c_str(), s.c_str(), u.c_str(), files.back().c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
      }
      children.push_back(child);
    }
    std::vector<Acquisition> all;
    for (std::size_t p = 0; p < children.size(); ++p) {
      int status = 0;
      ::waitpid(children[p], &status, 0);
      ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
      std::ifstream in(files[p]);
      Acquisition a;
      while (in >> a.acquired_ns >> a.released_ns >> a.wait_ns >> a.worker) all.push_back(a);
      std::remove(files[p].c_str());
    }
    ok &= analyse(report, "4 processes x 4 threads", all, data.get(kCounter) - before, seconds, 16, floors);
  }
  ok &= run_thread_sweep(report, target, data);
  return ok;
}

}  // namespace bench
