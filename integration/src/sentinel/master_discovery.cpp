// Asking the Sentinels where the master is: every Sentinel at once, the address under the
// highest config-epoch confirmed with ROLE, and a message naming what each one answered.
#include "sentinel/master_discovery.hpp"

#include <algorithm>
#include <charconv>
#include <future>
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

// What one Sentinel said: where the master is and under which config-epoch,
// or (miss) why it could not say.
struct Answer {
  std::optional<FoundMaster> named;
  std::optional<Attempt> miss;
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

template <typename Number>
std::optional<Number> parse_number(const std::string& text) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<NodeAddress> parse_address(const RedisReply& reply) {
  if (reply.type != RedisReply::Type::Array || reply.elements.size() != 2) return std::nullopt;
  const auto port = parse_number<int>(reply.elements[1].str);
  if (!port || *port < 1 || *port > 65535 || reply.elements[0].str.empty()) return std::nullopt;
  return NodeAddress{reply.elements[0].str, *port};
}

// SENTINEL MASTER answers field/value pairs; config-epoch is among them.
std::optional<std::uint64_t> parse_config_epoch(const RedisReply& reply) {
  if (reply.type != RedisReply::Type::Array) return std::nullopt;
  for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2) {
    if (reply.elements[i].str == "config-epoch") return parse_number<std::uint64_t>(reply.elements[i + 1].str);
  }
  return std::nullopt;
}

// Asks one Sentinel where the master is, and under which config-epoch.
Answer ask_sentinel(const RedisConfig& config, const NodeAddress& sentinel) {
  const std::string where = to_string(sentinel);
  const auto miss = [&](Miss kind, std::string detail) { return Answer{{}, Attempt{where, kind, std::move(detail)}}; };
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
      if (answer.is_error()) return miss(Miss::auth_refused, "AUTH refused: " + answer.str);
    }
    // Both in one pipeline, so they describe one moment. The address comes
    // from GET-MASTER-ADDR-BY-NAME: while the Sentinel that ran a failover
    // reconfigures the replicas, SENTINEL MASTER still shows the old address
    // beside the new epoch, GET-MASTER-ADDR-BY-NAME already the promoted one.
    const std::string& name = config.sentinel.master_name;
    const std::vector<RedisReply> replies =
        connection.pipeline({{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", name}, {"SENTINEL", "MASTER", name}});
    const RedisReply& address_reply = replies.at(0);
    const RedisReply& master_reply = replies.at(1);
    for (const RedisReply* reply : {&address_reply, &master_reply}) {
      if (!reply->is_error()) continue;
      const bool auth = reply->str.starts_with("NOAUTH") || reply->str.starts_with("WRONGPASS");
      if (auth || !address_reply.is_nil()) return miss(auth ? Miss::auth_refused : Miss::refused, reply->str);
    }
    if (address_reply.is_nil()) return miss(Miss::name_unknown, "does not monitor '" + name + "'");
    const auto address = parse_address(address_reply);
    if (!address) return miss(Miss::refused, "answered something that is not host and port");
    const auto config_epoch = parse_config_epoch(master_reply);
    if (!config_epoch) return miss(Miss::refused, "answered SENTINEL MASTER without a config-epoch");
    return Answer{FoundMaster{*address, *config_epoch}, {}};
  } catch (const ConnectionError& e) {
    return miss(Miss::unreachable, cause_of(e.what()));
  }
}

// Every Sentinel at once: a slow or unreachable one delays the answer by its
// own timeouts, not by the sum of everyone's. Answers come back in config order.
std::vector<Answer> ask_every_sentinel(const RedisConfig& config) {
  std::vector<std::future<Answer>> asking;
  asking.reserve(config.sentinel.nodes.size());
  for (const NodeAddress& sentinel : config.sentinel.nodes) {
    asking.push_back(std::async(std::launch::async, [&config, sentinel] { return ask_sentinel(config, sentinel); }));
  }
  std::vector<Answer> answers;
  answers.reserve(asking.size());
  for (auto& answer : asking) answers.push_back(answer.get());
  return answers;
}

}  // namespace

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
    return "it is a " + role.elements[0].str + " now (the failover is not finished)";
  } catch (const ConnectionError& e) {
    // A refused AUTH names the master's settings, redis.username and redis.password: kept whole.
    return e.what();
  }
}

namespace {

// The addresses named under the highest config-epoch, the one most Sentinels
// name first (then the first named). Lower epochs are left out: their
// addresses are masters the newest configuration has replaced.
std::vector<NodeAddress> newest_candidates(const std::vector<Answer>& answers, std::uint64_t newest) {
  std::vector<std::pair<NodeAddress, int>> counted;  // in order of first naming
  for (const Answer& answer : answers) {
    if (!answer.named || answer.named->config_epoch != newest) continue;
    auto it = std::find_if(counted.begin(), counted.end(),
                           [&](const auto& entry) { return entry.first == answer.named->address; });
    if (it == counted.end()) {
      counted.emplace_back(answer.named->address, 1);
    } else {
      ++it->second;
    }
  }
  std::stable_sort(counted.begin(), counted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<NodeAddress> candidates;
  for (const auto& entry : counted) candidates.push_back(entry.first);
  return candidates;
}

std::string advice_for(Miss miss) {
  switch (miss) {
    case Miss::unreachable: return "check redis.sentinel.nodes and that redis-sentinel runs there";
    case Miss::auth_refused:
      return "check redis.sentinel.username and redis.sentinel.password (the Sentinels' own AUTH, not the master's)";
    case Miss::name_unknown:
      return "check redis.sentinel.master_name (the name in the Sentinels' `sentinel monitor` line)";
    case Miss::refused:
      return "check the Sentinels' ACL: dlock needs +sentinel|get-master-addr-by-name and +sentinel|master";
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

FoundMaster discover_master(const RedisConfig& config) {
  const std::vector<Answer> answers = ask_every_sentinel(config);
  std::optional<std::uint64_t> newest;
  for (const Answer& answer : answers) {
    if (answer.named) newest = std::max(newest.value_or(0), answer.named->config_epoch);
  }
  // Each address is dialled once, however many Sentinels name it.
  std::vector<std::pair<NodeAddress, std::string>> not_masters;
  if (newest) {
    for (const NodeAddress& candidate : newest_candidates(answers, *newest)) {
      std::string why = why_not_master(config, candidate);
      if (why.empty()) return FoundMaster{candidate, *newest};
      not_masters.emplace_back(candidate, std::move(why));
    }
  }
  std::vector<Attempt> attempts;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const Answer& answer = answers[i];
    if (answer.miss) {
      attempts.push_back(*answer.miss);
      continue;
    }
    const FoundMaster& named = *answer.named;
    std::string detail = "named " + to_string(named.address) + " at config-epoch " + std::to_string(named.config_epoch);
    if (named.config_epoch < *newest) {
      detail += ", older than config-epoch " + std::to_string(*newest) + " named by another";
    } else {
      for (const auto& [address, why] : not_masters) {
        if (address == named.address) detail += ": " + why;
      }
    }
    attempts.push_back({to_string(config.sentinel.nodes[i]), Miss::no_master_there, std::move(detail)});
  }
  // Every Sentinel refused the login: a setting to fix, not an outage to wait out.
  const bool all_refused_login =
      !attempts.empty() &&
      std::all_of(attempts.begin(), attempts.end(), [](const Attempt& a) { return a.miss == Miss::auth_refused; });
  if (all_refused_login) throw AuthenticationError(describe(config, attempts));
  throw ConnectionError(describe(config, attempts));
}

bool is_readonly_refusal(const std::string& error) { return error.starts_with("READONLY"); }

}  // namespace dlock::detail
