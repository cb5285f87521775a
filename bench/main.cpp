// dlock-bench: dlock against the Redis round-trip floor, in one run.
//
//   dlock-bench [--quick] [--json FILE] [--redis HOST:PORT] [--only PART]
//               [--async-seconds S] [--async-waiters N]
//   dlock-bench --cycles CLIENT [--seconds S] [--redis HOST:PORT]
//   dlock-bench --cycles CLIENT --count N [--threads T] [--redis HOST:PORT]
//
// Without --redis it starts its own throwaway redis-server on loopback.
// Exits non-zero if a correctness check failed (a counter not exact, a lock
// lost); timings never fail it. --cycles times one client's uncontended
// lock+unlock (dlock, ideal, minimal-pair or bare) for S seconds and prints
// only its cycles per second, for bench/peers/run.sh to set beside other
// languages' clients; with --count it runs exactly N cycles (T threads of one
// dlock service on one key: contended) and prints nothing, for
// bench/callgrind.sh.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include "bench_target.hpp"
#include "counted_cycles.hpp"
#include "lock_cycle.hpp"
#include "redis_server.hpp"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--worker") == 0) return bench::contention_worker_main(argc, argv);
  if (argc > 1 && std::strcmp(argv[1], "--async-contender") == 0) return bench::async_contender_main(argc, argv);

  bench::Target target;
  std::string json_path, redis_address, only, cycles_client;
  double cycles_seconds = 1.0;
  long long cycles_count = 0;  // 0: time the cycles for --seconds instead
  int cycles_threads = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--cycles" && i + 1 < argc) {
      cycles_client = argv[++i];
    } else if (arg == "--seconds" && i + 1 < argc) {
      cycles_seconds = std::atof(argv[++i]);
    } else if (arg == "--count" && i + 1 < argc) {
      cycles_count = std::atoll(argv[++i]);
    } else if (arg == "--threads" && i + 1 < argc) {
      cycles_threads = std::atoi(argv[++i]);
    } else if (arg == "--async-seconds" && i + 1 < argc) {
      target.async_seconds = std::atof(argv[++i]);
    } else if (arg == "--async-waiters" && i + 1 < argc) {
      target.async_waiters = std::atoi(argv[++i]);
    } else if (arg == "--held" && i + 1 < argc) {
      target.held = std::atoi(argv[++i]);
      if (target.held <= 0) {
        std::cerr << "dlock-bench: --held wants a number of locks to hold at once, such as 1000000\n";
        return 64;
      }
    } else if (arg == "--quick") {
      target.quick = true;
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (arg == "--redis" && i + 1 < argc) {
      redis_address = argv[++i];
    } else {
      std::cerr << "usage: dlock-bench [--quick] [--json FILE] [--redis HOST:PORT] "
                   "[--only uncontended|server|contention|watchdog|many-keys|peers|tls|async]\n"
                   "                   [--async-seconds S] [--async-waiters N] [--held N]\n"
                   "       dlock-bench --cycles dlock|dlock-raii|ideal|minimal-pair|bare [--seconds S] [--redis HOST:PORT]\n"
                   "       dlock-bench --cycles CLIENT --count N [--threads T] [--redis HOST:PORT]\n";
      return 64;
    }
  }
  if (cycles_count < 0 || cycles_threads < 1) {
    std::cerr << "dlock-bench: --count wants a number of cycles, --threads a number of threads\n";
    return 64;
  }
  if (target.async_seconds < 0 || target.async_waiters < 0) {
    std::cerr << "dlock-bench: --async-seconds wants a number of seconds, --async-waiters a number of coroutines\n";
    return 64;
  }
  if (!(cycles_seconds > 0)) {
    std::cerr << "dlock-bench: --seconds wants a positive number of seconds\n";
    return 64;
  }
  char self[4096] = {};
  if (::readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return 1;
  target.self_path = self;

  std::unique_ptr<dlock::test::RedisServer> server;
  if (redis_address.empty()) {
    server = std::make_unique<dlock::test::RedisServer>();
    target.host = server->host();
    target.port = server->port();
  } else {
    auto colon = redis_address.rfind(':');
    target.host = redis_address.substr(0, colon);
    target.port = std::stoi(redis_address.substr(colon + 1));
  }
  if (!cycles_client.empty()) {
    try {
      if (cycles_count > 0) {
        bench::run_counted_cycles(cycles_client, target, cycles_count, cycles_threads);
        return 0;
      }
      auto cycle = bench::make_lock_cycle(cycles_client, target);
      std::printf("%.0f\n", bench::cycles_per_second(*cycle, cycles_seconds));
      return 0;
    } catch (const std::exception& e) {
      std::cerr << "dlock-bench --cycles " << cycles_client << ": " << e.what() << "\n";
      return 1;
    }
  }
  std::cout << "dlock-bench against redis " << target.host << ":" << target.port << (target.quick ? " (quick)" : "")
            << "\n";

  bench::Report report(json_path);
  bool ok = true;
  try {
    auto wanted = [&](const char* part) { return only.empty() || only == part; };
    const bench::Floors floors = bench::run_uncontended(report, target);  // the yardstick of every part
    bench::ServerCycleCost server_cost;
    if (wanted("server") || wanted("contention")) server_cost = bench::run_server_cost(report, target);
    if (wanted("contention")) ok &= bench::run_contention(report, target, floors, server_cost);
    if (wanted("watchdog")) ok &= bench::run_watchdog_scale(report, target);
    if (wanted("many-keys")) ok &= bench::run_many_keys(report, target);
    if (wanted("peers")) ok &= bench::run_peers(report, target);
    if (wanted("tls")) ok &= bench::run_tls(report, target);
    if (wanted("async")) ok &= bench::run_async(report, target, floors);
  } catch (const std::exception& e) {
    std::cerr << "benchmark failed: " << e.what() << "\n";
    return 1;
  }
  std::cout << "\ncorrectness: " << (ok ? "all counters exact, no lock lost" : "FAILED") << "\n";
  return ok ? 0 : 1;
}
