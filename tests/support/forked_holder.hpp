#pragma once
// A lock holder in a process of its own, to be SIGKILLed: what a crash leaves
// in Redis. Fork it before this process starts threads of its own (a forked
// child has only the forking thread).

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>

#include "services.hpp"

namespace dlock::test {

// Says to the parent "go on" (once; later calls do nothing).
using ReadySignal = std::function<void()>;

// Forks a child that takes something with `take` on a service of its own
// (watchdog lease `lease`, renewed while it lives; logging off) and keeps it
// until killed. Returns the child's pid once `take` called its ReadySignal,
// or returned (a guard held): so a child may signal before it blocks, to
// stand in line. Returns -1 if the child could not be started or failed.
inline pid_t fork_holder(const RedisServer& redis, std::chrono::milliseconds lease,
                         const std::function<std::shared_ptr<void>(RedisLockService&, const ReadySignal&)>& take) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    bool signalled = false;
    const ReadySignal signal = [&] {
      char byte = 'R';
      if (!signalled && ::write(ready[1], &byte, 1) != 1) ::_exit(2);
      signalled = true;
    };
    try {
      auto service = make_service(redis, [lease](Config& c) {
        c.lock.watchdog_timeout = lease;
        c.logging.level = "off";
      });
      auto held = take(*service, signal);
      signal();
      for (;;) ::pause();
    } catch (...) {
      ::_exit(1);
    }
  }
  ::close(ready[1]);
  char byte = 0;
  if (child > 0 && ::read(ready[0], &byte, 1) != 1) child = -1;
  ::close(ready[0]);
  return child;
}

// A guard of any kind, kept alive as fork_holder's `take` returns it.
template <typename Guard>
std::shared_ptr<void> keep(Guard guard) {
  return std::make_shared<Guard>(std::move(guard));
}

// SIGKILLs `child`, reaps it, and returns when it was killed.
inline std::chrono::steady_clock::time_point kill_holder(pid_t child) {
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  return std::chrono::steady_clock::now();
}

}  // namespace dlock::test
