#include "master_discovery.hpp"

#include <charconv>
#include <optional>
#include <set>
#include <vector>

#include "dlock/errors.hpp"
#include "dlock/redis_connection.hpp"

namespace dlock::detail {
namespace {

// Why one Sentinel's answer led to no master; each names its own setting.
enum class Miss { unreachable, auth_refused, name_unknown, refused, no_master_there };

struct Attempt {
  std::string sentinel;
  Miss miss;
  std::string detail;
};

// "redis H:P: connection refused; check redis.host ..." → "connection refused":
// the advice names the master's settings, which are not the ones at fault here.
std::string cause_of(const std::string& message) {
  std::string cause = message;
  if (cause.starts_with("redis ")) {
    if (const auto colon = cause.find(": "); colon != std::string::npos) cause.erase(0, colon + 2);
  }
  if (const auto advice = cause.find("; check"); advice != std::string::npos) cause.erase(advice);
  return cause;
}

std::optional<NodeAddress> parse_address(const RedisReply& reply) {
  if (reply.type != RedisReply::Type::Array || reply.elements.size() != 2) return std::nullopt;
  const std::string& port_text = reply.elements[1].str;
  int port = 0;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535) {
    return std::nullopt;
  }
  if (reply.elements[0].str.empty()) return std::nullopt;
  return NodeAddress{reply.elements[0].str, port};
}

// Asks one Sentinel where the master is; nullopt (and an Attempt) when it cannot say.
std::optional<NodeAddress> ask_sentinel(const RedisConfig& config, const NodeAddress& sentinel,
                                        std::vector<Attempt>& attempts) {
  const std::string where = to_string(sentinel);
  RedisConfig dial = sentinel_connection_config(config, false);
  dial.host = sentinel.host;
  dial.port = sentinel.port;
  try {
    RedisConnection connection(dial);
    // AUTH is sent here rather than by RedisConnection so a refusal names the Sentinel's settings.
    if (!config.sentinel.password.empty() || !config.sentinel.username.empty()) {
      RedisCommand auth{"AUTH"};
      if (!config.sentinel.username.empty()) auth.push_back(config.sentinel.username);
      auth.push_back(config.sentinel.password);
      const RedisReply answer = connection.command(auth);
      if (answer.is_error()) {
        attempts.push_back({where, Miss::auth_refused, "AUTH refused: " + answer.str});
        return std::nullopt;
      }
    }
    const RedisReply reply = connection.command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", config.sentinel.master_name});
    if (reply.is_error()) {
      const bool auth = reply.str.starts_with("NOAUTH") || reply.str.starts_with("WRONGPASS");
      attempts.push_back({where, auth ? Miss::auth_refused : Miss::refused, reply.str});
      return std::nullopt;
    }
    if (reply.is_nil()) {
      attempts.push_back({where, Miss::name_unknown, "does not monitor '" + config.sentinel.master_name + "'"});
      return std::nullopt;
    }
    auto address = parse_address(reply);
    if (!address) attempts.push_back({where, Miss::refused, "answered something that is not host and port"});
    return address;
  } catch (const ConnectionError& e) {
    attempts.push_back({where, Miss::unreachable, cause_of(e.what())});
    return std::nullopt;
  }
}

// Empty when `address` answers ROLE as a master; else why it is not the one.
std::string why_not_master(const RedisConfig& config, const NodeAddress& address) {
  RedisConfig dial = config;
  dial.endpoint_source = nullptr;
  dial.host = address.host;
  dial.port = address.port;
  try {
    RedisConnection connection(dial);
    const RedisReply role = connection.command({"ROLE"});
    if (role.is_error()) return "ROLE refused (" + role.str + "): the master's user needs +role";
    if (role.type != RedisReply::Type::Array || role.elements.empty()) return "ROLE answered something unexpected";
    if (role.elements[0].str == "master") return "";
    return "it is a " + role.elements[0].str + " now (that Sentinel has not seen the failover yet)";
  } catch (const ConnectionError& e) {
    // A refused AUTH names the master's settings, redis.username and redis.password: kept whole.
    return e.what();
  }
}

std::string advice_for(Miss miss) {
  switch (miss) {
    case Miss::unreachable: return "check redis.sentinel.nodes and that redis-sentinel runs there";
    case Miss::auth_refused:
      return "check redis.sentinel.username and redis.sentinel.password (the Sentinels' own AUTH, not the master's)";
    case Miss::name_unknown:
      return "check redis.sentinel.master_name (the name in the Sentinels' `sentinel monitor` line)";
    case Miss::refused: return "check the Sentinels' ACL: dlock needs +sentinel|get-master-addr-by-name";
    case Miss::no_master_there: return "a failover may be under way: try again shortly";
  }
  return "";
}

std::string describe(const RedisConfig& config, const std::vector<Attempt>& attempts) {
  std::string text = "redis.sentinel: no Sentinel named a usable master '" + config.sentinel.master_name + "'; asked ";
  std::set<Miss> misses;
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    if (i) text += ", ";
    text += attempts[i].sentinel + " (" + attempts[i].detail + ")";
    misses.insert(attempts[i].miss);
  }
  if (attempts.empty()) text += "none: redis.sentinel.nodes is empty";
  for (const Miss miss : misses) text += "; " + advice_for(miss);
  return text;
}

}  // namespace

RedisConfig sentinel_connection_config(const RedisConfig& config, bool authenticated) {
  RedisConfig dial = config;
  dial.endpoint_source = nullptr;
  dial.database = 0;  // a Sentinel has no databases: SELECT would be refused
  dial.username = authenticated ? config.sentinel.username : "";
  dial.password = authenticated ? config.sentinel.password : "";
  return dial;
}

NodeAddress discover_master(const RedisConfig& config) {
  std::vector<Attempt> attempts;
  // Sentinels that have not heard of a failover all name the same old master: it is dialled once.
  std::set<std::pair<std::string, int>> not_masters;
  for (const NodeAddress& sentinel : config.sentinel.nodes) {
    const auto named = ask_sentinel(config, sentinel, attempts);
    if (!named) continue;
    const std::string where = to_string(sentinel);
    if (not_masters.contains({named->host, named->port})) {
      attempts.push_back({where, Miss::no_master_there, "named " + to_string(*named) + ", not a master either"});
      continue;
    }
    const std::string why = why_not_master(config, *named);
    if (why.empty()) return *named;
    not_masters.insert({named->host, named->port});
    attempts.push_back({where, Miss::no_master_there, "named " + to_string(*named) + ": " + why});
  }
  throw ConnectionError(describe(config, attempts));
}

bool is_readonly_refusal(const std::string& error) { return error.starts_with("READONLY"); }

}  // namespace dlock::detail
