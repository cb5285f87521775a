// One member of a line of waiters in a process of its own, for the fairness
// tests: takes a lock and appends its name to the Redis list "order:KEY" the
// moment it holds it.
//
//   line_member --port P --key K --name N [--wait-ms W] [--lease-ms L] [--hold]
// With --lease-ms the lock has that fixed lease and is detached (never
// released: it ends with its lease) before the program exits 0; without it the
// watchdog renews a 1 s lease. With --hold the program keeps the lock until it
// is killed. Exits 75 if the lock was not had within the wait.
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "dlock/dlock.hpp"

int main(int argc, char** argv) {
  int port = 0;
  long long wait_ms = 0, lease_ms = 0;
  bool hold = false;
  std::string key, name;
  for (int i = 1; i < argc; ++i) {
    const auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (std::strcmp(argv[i], "--port") == 0) port = std::atoi(next().c_str());
    else if (std::strcmp(argv[i], "--key") == 0) key = next();
    else if (std::strcmp(argv[i], "--name") == 0) name = next();
    else if (std::strcmp(argv[i], "--wait-ms") == 0) wait_ms = std::atoll(next().c_str());
    else if (std::strcmp(argv[i], "--lease-ms") == 0) lease_ms = std::atoll(next().c_str());
    else if (std::strcmp(argv[i], "--hold") == 0) hold = true;
  }
  if (port <= 0 || key.empty() || name.empty()) return 64;
  dlock::Config config;
  config.redis.port = port;
  config.lock.watchdog_timeout = std::chrono::milliseconds(1000);
  config.logging.level = "off";
  auto service = dlock::make_lock_service(config);
  auto recorder = std::make_shared<dlock::HiredisExecutor>(config.redis);
  dlock::LockOptions options{.wait = std::chrono::milliseconds(wait_ms)};
  if (lease_ms > 0) options.lease = std::chrono::milliseconds(lease_ms);
  auto guard = service->try_lock(key, options);
  if (!guard) return 75;
  recorder->command({"RPUSH", "order:" + key, name});
  if (hold) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  guard.detach();
  return 0;
}
