// The start-up checks of each master's INFO: an evicting maxmemory-policy, and fewer
// replicas connected than lock.replica_acks asks for. They warn; they never refuse.
#include "dlock/detail/server_checks.hpp"

#include <functional>
#include <string>
#include <string_view>

#include "dlock/errors.hpp"

namespace dlock::detail {
namespace {

// The value of `field` in INFO's "field:value\r\n" lines, or empty.
std::string info_field(std::string_view info, std::string_view field) {
  std::size_t at = 0;
  while (at < info.size()) {
    std::size_t end = info.find('\n', at);
    if (end == std::string_view::npos) end = info.size();
    std::string_view line = info.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > field.size() && line.starts_with(field) && line[field.size()] == ':') {
      return std::string(line.substr(field.size() + 1));
    }
    at = end + 1;
  }
  return {};
}

// The text of INFO `section`, or empty (with a debug line naming `check`) when it cannot be read.
std::string read_info(RedisExecutor& redis, spdlog::logger& logger, const char* section, const char* check) {
  RedisReply reply;
  try {
    reply = redis.command({"INFO", section});
  } catch (const Error& e) {
    logger.debug("{} check skipped: INFO failed: {}", check, e.what());
    return {};
  }
  if (reply.type != RedisReply::Type::String) {
    logger.debug("{} check skipped: INFO answered {}", check, reply.is_error() ? reply.str : "no text");
    return {};
  }
  return std::move(reply.str);
}

// Runs `check` on every master (a cluster's each; one server: itself). A
// master that cannot be reached is passed over with a debug line: the checks
// only warn, and a call that needs it will say more.
void on_every_master(RedisExecutor& redis, spdlog::logger& logger, const char* check,
                     const std::function<void(RedisExecutor&)>& run) {
  try {
    redis.for_each_master(run);
  } catch (const Error& e) {
    logger.debug("{} check skipped: {}", check, e.what());
  }
}

}  // namespace

void warn_if_evicting(RedisExecutor& redis, spdlog::logger& logger) {
  on_every_master(redis, logger, "eviction", [&](RedisExecutor& master) {
    const std::string info = read_info(master, logger, "memory", "eviction");
    if (info.empty()) return;
    const std::string maxmemory = info_field(info, "maxmemory");
    const std::string policy = info_field(info, "maxmemory_policy");
    if (maxmemory.empty() || maxmemory == "0" || policy.empty() || policy == "noeviction") return;
    logger.warn("redis {} has maxmemory {} with maxmemory-policy {}: under memory pressure it may evict a held lock "
                "(lock keys have a TTL) and let a second owner in; set maxmemory-policy noeviction on the Redis that "
                "holds locks",
                master.endpoint(), maxmemory, policy);
  });
}

void warn_if_too_few_replicas(RedisExecutor& redis, spdlog::logger& logger, int wanted) {
  if (wanted <= 0) return;
  on_every_master(redis, logger, "replica", [&](RedisExecutor& master) {
    const std::string info = read_info(master, logger, "replication", "replica");
    if (info.empty()) return;
    const std::string connected = info_field(info, "connected_slaves");
    if (connected.empty() || std::stoll("0" + connected) >= wanted) return;
    logger.warn("redis {} has {} replica(s) connected but lock.replica_acks asks {} to acknowledge every acquisition: "
                "until enough replicas connect, no lock can be taken; connect replicas or lower lock.replica_acks",
                master.endpoint(), connected, wanted);
  });
}

}  // namespace dlock::detail
