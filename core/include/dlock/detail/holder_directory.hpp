#pragma once
// Who holds a lock, as an operator reads it: the host and pid of the service
// behind an acquisition id, from that service's registry entry
// (instance_registry.hpp), and since when its lock() call began, from the
// id's number (acquisition_id.hpp). Plain GETs: no script, nothing per lock
// in the services.

#include <map>
#include <optional>
#include <string>

#include "dlock/lock_status.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// Reads registry entries, each at most once (on a Redlock, from every node at once).
class HolderDirectory {
 public:
  HolderDirectory(RedisExecutor& redis, std::string key_prefix) : redis_(redis), key_prefix_(std::move(key_prefix)) {}

  // `owner` (an acquisition id) with what its service's entry tells of it.
  LockHolder holder(const std::string& owner, long long hold_count);

 private:
  std::optional<HolderService> service(const std::string& instance_id);

  RedisExecutor& redis_;
  const std::string key_prefix_;
  std::map<std::string, std::optional<HolderService>> entries_;
};

}  // namespace dlock::detail
