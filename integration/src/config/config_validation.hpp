#pragma once
// Turning the text of one setting into a checked value. Nothing here knows
// about YAML or files: a bad value throws InvalidValue with a message that
// starts after the setting name ("is out of range 1..65535"), and the caller
// adds "FILE:LINE: setting: " in front, because only it knows where the text
// came from (a YAML value, an environment variable, a Config built in code).

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/common.h>

#include "dlock/config.hpp"

namespace dlock::detail {

class InvalidValue : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A decimal integer (optional sign) within [min, max]. `expected` names what
// the setting holds, for the message: "an integer number of milliseconds".
long long parse_integer(std::string_view text, long long min, long long max,
                        std::string_view expected);

// The parts of redis[s]://[user[:password]@]host[:port][/database], with user
// and password percent-decoded; rediss:// means TLS. Rejects other schemes.
// `url` is the raw setting: ${VAR} references in it are expanded into the
// parts after the split, and taken literally (never percent-decoded).
// Messages never repeat the URL, since it may hold a password.
struct RedisUrl {
  std::string host;
  int port = 6379;
  std::string username;
  std::string password;
  int database = 0;
  bool tls = false;
};
RedisUrl parse_redis_url(std::string_view url);

// "host:port" ("[::1]:6379" for IPv6); the port is required.
NodeAddress parse_node_address(std::string_view text);

// Every acquisition, renewal and release of a Redlock goes to all its nodes
// at once, so each node adds connections and a reply to wait for on every
// call; past a handful, more nodes add cost, not safety.
inline constexpr std::size_t max_redlock_nodes = 15;

// The nodes of redis.redlock.nodes: an odd number, 3..max_redlock_nodes, no
// server twice (hosts compared without regard to case). The majority is
// counted over this list, so a node listed twice would vote twice, and an
// even count has no clean majority.
void check_redlock_nodes(const std::vector<NodeAddress>& nodes);

// true/false (also yes/no, on/off), without regard to case.
bool parse_boolean(std::string_view text);

// Ranges shared by the YAML reader and the environment overrides.
inline constexpr long long min_port = 1;
inline constexpr long long max_port = 65535;
inline constexpr long long max_database = 65535;

// Level names accepted in logging.level, matched without regard to case.
inline constexpr std::string_view log_level_names = "trace, debug, info, warn, error, off";
std::optional<spdlog::level::level_enum> log_level_from_name(std::string_view name);

}  // namespace dlock::detail
