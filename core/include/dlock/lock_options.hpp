#pragma once
// The settings of the lock itself (config section `lock:`) and per-call options.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace dlock {

using Millis = std::chrono::milliseconds;

// Config section `lock:`; the defaults are the documented ones.
struct LockConfig {
  std::string key_prefix = "dlock:";
  Millis watchdog_timeout{30000};  // lease of a watchdog-managed lock
  Millis wait{0};                  // default wait of lock() and try_lock()
  std::size_t max_key_bytes = 1024;
};

struct LockOptions {
  // How long lock() may wait for a busy lock; unset → LockConfig::wait.
  std::optional<Millis> wait{};
  // A fixed lease that nobody renews; unset → the watchdog keeps the lock
  // for as long as it is held, with LockConfig::watchdog_timeout as lease.
  std::optional<Millis> lease{};
};

}  // namespace dlock
