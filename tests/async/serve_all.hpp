#pragma once
// Collects async waiters' guards as they are served, in whatever order,
// releasing each at once so that the next in line gets the lock.

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "dlock/lock_guard.hpp"

namespace dlock::test {

// How many of `waits` got the lock within `limit` (a wait that failed counts as not served).
inline int serve_all(std::vector<std::future<LockGuard>>& waits, std::chrono::seconds limit) {
  using namespace std::chrono_literals;
  int served = 0;
  std::vector<bool> taken(waits.size(), false);
  const auto give_up = std::chrono::steady_clock::now() + limit;
  std::size_t done = 0;
  while (done < waits.size() && std::chrono::steady_clock::now() < give_up) {
    bool any = false;
    for (std::size_t i = 0; i < waits.size(); ++i) {
      if (taken[i] || waits[i].wait_for(0s) != std::future_status::ready) continue;
      taken[i] = true;
      ++done;
      any = true;
      try {
        if (LockGuard guard = waits[i].get()) ++served;
      } catch (...) {
      }
    }
    if (!any) std::this_thread::sleep_for(1ms);
  }
  return served;
}

}  // namespace dlock::test
