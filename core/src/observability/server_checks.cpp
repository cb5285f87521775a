// The start-up checks of each master's INFO: an evicting maxmemory-policy, and fewer
// replicas connected than lock.replica_acks asks for. They warn; they never refuse.
#include "dlock/detail/server_checks.hpp"

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/detail/in_parallel.hpp"
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

// What one master's INFO `section` says: its text, or why it could not be read.
struct InfoRead {
  std::string endpoint;  // the master's: a cluster's masters are visited as executors that last only the visit
  std::string text;  // empty when it could not be read
  std::string failure;
};

InfoRead read_info(RedisExecutor& master, const char* section) {
  InfoRead read{master.endpoint(), {}, {}};
  try {
    RedisReply reply = master.command({"INFO", section});
    if (reply.type == RedisReply::Type::String) {
      read.text = std::move(reply.str);
    } else {
      read.failure = "INFO answered " + (reply.is_error() ? reply.str : std::string("no text"));
    }
  } catch (const Error& e) {
    read.failure = std::string("INFO failed: ") + e.what();
  }
  return read;
}

// Reads INFO `section` of every master (a cluster's each; one server: itself)
// and runs `check` on each text read. A Redlock's nodes are read at once: a
// paused node costs the start-up one command timeout, however many are
// paused. A master that cannot be read is passed over with a debug line: the
// checks only warn, and a call that needs it will say more. The logger is
// only used on this thread (a user's logger need not be thread-safe).
void on_every_master(RedisExecutor& redis, spdlog::logger& logger, const char* section, const char* check_name,
                     const std::function<void(const std::string& endpoint, const std::string& info)>& check) {
  std::vector<InfoRead> reads;
  if (const std::vector<RedisExecutor*> nodes = redis.quorum_nodes(); !nodes.empty()) {
    reads.resize(nodes.size());
    (void)in_parallel(nodes.size(), [&](std::size_t i) { reads[i] = read_info(*nodes[i], section); });
  } else {
    try {
      redis.for_each_master([&](RedisExecutor& master) { reads.push_back(read_info(master, section)); });
    } catch (const Error& e) {
      logger.debug("{} check skipped: {}", check_name, e.what());
    }
  }
  for (const InfoRead& read : reads) {
    if (read.text.empty()) {
      logger.debug("{} check skipped: {}", check_name, read.failure);
    } else {
      check(read.endpoint, read.text);
    }
  }
}

}  // namespace

void warn_if_evicting(RedisExecutor& redis, spdlog::logger& logger) {
  on_every_master(redis, logger, "memory", "eviction", [&](const std::string& endpoint, const std::string& info) {
    const std::string maxmemory = info_field(info, "maxmemory");
    const std::string policy = info_field(info, "maxmemory_policy");
    if (maxmemory.empty() || maxmemory == "0" || policy.empty() || policy == "noeviction") return;
    logger.warn("redis {} has maxmemory {} with maxmemory-policy {}: under memory pressure it may evict a held lock "
                "(lock keys have a TTL) and let a second owner in; set maxmemory-policy noeviction on the Redis that "
                "holds locks",
                endpoint, maxmemory, policy);
  });
}

void warn_if_too_few_replicas(RedisExecutor& redis, spdlog::logger& logger, int wanted) {
  if (wanted <= 0) return;
  on_every_master(redis, logger, "replication", "replica", [&](const std::string& endpoint, const std::string& info) {
    const std::string connected = info_field(info, "connected_slaves");
    if (connected.empty() || std::stoll("0" + connected) >= wanted) return;
    logger.warn("redis {} has {} replica(s) connected but lock.replica_acks asks {} to acknowledge every acquisition: "
                "until enough replicas connect, no lock can be taken; connect replicas or lower lock.replica_acks",
                endpoint, connected, wanted);
  });
}

}  // namespace dlock::detail
