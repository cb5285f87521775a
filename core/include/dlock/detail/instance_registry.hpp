#pragma once
// Who holds a lock, at no cost per lock: every service writes one small entry
// about itself, P"instance:"<instance> (P the key prefix, <instance> the 32
// hex digits that begin each of its acquisition ids), holding its host, pid
// and start time. It is written at start-up, then, from the service's first
// lock on, kept alive by the watchdog's renewer at a low fixed rate (once per
// lease period; it expires after three), and deleted when the service ends
// in order. `dlock status` and `dlock list` read it for each holder they show.
//
// The registry is a courtesy to operators, never a condition for locking: a
// Redis that refuses the write (a key pattern that covers only lock names)
// costs one warning and no registry, nothing else.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/logger.h>

#include "dlock/lock_options.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::detail {

struct InstanceEntry {
  std::string host;
  long long pid = 0;
  long long started_unix_ms = 0;  // acquisition number 0 (acquisition_id.hpp) in wall-clock time
};

// The Redis name of an instance's entry.
std::string instance_key(std::string_view prefix, std::string_view instance_id);

// "host=web-3 pid=4242 started_ms=1714560000000": readable with redis-cli GET.
std::string encode_instance(const InstanceEntry& entry);
// Nothing if `text` is not such an entry.
std::optional<InstanceEntry> decode_instance(std::string_view text);

// This process' entry: its host name (gethostname) and pid.
InstanceEntry this_process(long long started_unix_ms);

class InstanceRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  // `period`: how often refresh() is meant to run; the entry lives three periods.
  InstanceRegistry(std::shared_ptr<RedisExecutor> redis, std::string key, const InstanceEntry& entry, Millis period,
                   std::shared_ptr<spdlog::logger> logger);

  // Writes the entry (SET with an expiry). False, with one warning, if Redis
  // refused it: the service then runs without an entry.
  bool enter();
  // Writes it again on the urgent path, giving up at `deadline`; failures are debug lines.
  void refresh(Clock::time_point deadline);
  // Deletes it, best effort (a debug line if that fails; it expires anyway).
  void leave();

  Millis period() const { return period_; }

 private:
  std::vector<std::string> write_command() const;

  const std::shared_ptr<RedisExecutor> redis_;
  const std::string key_;
  const std::string value_;
  const Millis period_;
  const std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace dlock::detail
