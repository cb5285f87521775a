#include "dlock/detail/eviction_check.hpp"

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

}  // namespace

void warn_if_evicting(RedisExecutor& redis, spdlog::logger& logger) {
  RedisReply reply;
  try {
    reply = redis.command({"INFO", "memory"});
  } catch (const Error& e) {
    logger.debug("eviction check skipped: INFO failed: {}", e.what());
    return;
  }
  if (reply.type != RedisReply::Type::String) {
    logger.debug("eviction check skipped: INFO answered {}", reply.is_error() ? reply.str : "no text");
    return;
  }
  const std::string maxmemory = info_field(reply.str, "maxmemory");
  const std::string policy = info_field(reply.str, "maxmemory_policy");
  if (maxmemory.empty() || maxmemory == "0" || policy.empty() || policy == "noeviction") return;
  logger.warn("redis {} has maxmemory {} with maxmemory-policy {}: under memory pressure it may evict a held lock "
              "(lock keys have a TTL) and let a second owner in; set maxmemory-policy noeviction on the Redis that "
              "holds locks",
              redis.endpoint(), maxmemory, policy);
}

}  // namespace dlock::detail
