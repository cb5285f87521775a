#pragma once
// Who holds a lock, as an operator reads it: the host and pid of the service
// behind an acquisition id, from that service's registry entry
// (dlock/detail/instance_registry.hpp), and since when its lock() call began,
// from the id's number (dlock/detail/acquisition_id.hpp). Plain GETs: no
// script, nothing per lock in the services.

#include <map>
#include <optional>
#include <string>

#include "dlock/detail/instance_registry.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::cli {

struct Holder {
  std::string owner;  // the acquisition id, the field in the lock's hash
  long long hold_count = 0;
  // None when the service has no entry: it stopped or crashed (the entry
  // outlives it by at most three lease periods), or Redis refused its write.
  std::optional<detail::InstanceEntry> service;
  std::optional<long long> since_unix_ms;  // when its lock() call began; needs `service`
};

// Reads registry entries, each at most once (on a Redlock, from every node at once).
class HolderDirectory {
 public:
  HolderDirectory(RedisExecutor& redis, std::string key_prefix) : redis_(redis), key_prefix_(std::move(key_prefix)) {}

  Holder holder(const std::string& owner, long long hold_count);

 private:
  std::optional<detail::InstanceEntry> service(const std::string& instance_id);

  RedisExecutor& redis_;
  const std::string key_prefix_;
  std::map<std::string, std::optional<detail::InstanceEntry>> entries_;
};

// "pid 4242 on web-3 since 2024-05-01T12:00:01.234Z (for 42s)", or what is known.
std::string holder_text(const Holder& holder, long long now_unix_ms);

// ,"host":…,"pid":…,"since":…,"service_started":… (null where unknown), to append to an object.
std::string holder_json_fields(const Holder& holder);

// 2024-05-01T12:00:01.234Z
std::string utc_timestamp(long long unix_ms);

long long now_unix_ms();

}  // namespace dlock::cli
