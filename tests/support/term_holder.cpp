// A service process that holds locks until it is asked to stop with SIGTERM,
// as a well-behaved service does: the signal handler only sets a flag, the
// threads see it, leave their critical sections, and the guards release the
// locks on the way out (tests/lock/test_lifecycle.cpp).
//
//   term_holder --port P [--lease-ms 30000]
// Takes `term:a` twice (re-entry) on the main thread and `term:b` inside
// WITH_DISTRIBUTED_LOCK on a worker thread, prints "ready" once all are held,
// and exits 0 after SIGTERM once every guard is released.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "dlock/dlock.hpp"

using namespace std::chrono_literals;

namespace {

std::atomic<bool> stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void on_sigterm(int) { stop_requested.store(true); }

void wait_for_stop() {
  while (!stop_requested.load()) std::this_thread::sleep_for(5ms);
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  int lease_ms = 30000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--port") == 0) port = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--lease-ms") == 0) lease_ms = std::atoi(argv[i + 1]);
  }
  if (port <= 0) {
    std::fprintf(stderr, "usage: term_holder --port P [--lease-ms L]\n");
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = on_sigterm;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);

  dlock::Config config;
  config.redis.port = port;
  config.lock.watchdog_timeout = std::chrono::milliseconds(lease_ms);
  config.logging.level = "warn";
  try {
    auto service = dlock::make_lock_service(config);
    dlock::set_default_lock_service(service);
    std::atomic<bool> worker_holds{false};
    std::thread worker([&] {
      WITH_DISTRIBUTED_LOCK("term:b") {
        worker_holds = true;
        wait_for_stop();
      }
    });
    auto outer = service->lock("term:a");
    auto inner = service->lock("term:a");
    while (!worker_holds.load() && !stop_requested.load()) std::this_thread::sleep_for(1ms);
    std::printf("ready\n");
    std::fflush(stdout);
    wait_for_stop();
    worker.join();
    dlock::set_default_lock_service(nullptr);
    return 0;  // inner, then outer, release here
  } catch (const std::exception& e) {
    std::fprintf(stderr, "term_holder: %s\n", e.what());
    return 3;
  }
}
