// One setting's text made a checked value: integers in range, redis:// URLs, host:port,
// Redlock node lists, booleans and log levels, with messages that say what to write.
#include "config/config_validation.hpp"

#include "config/env_expansion.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <utility>

namespace dlock::detail {
namespace {

std::string quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// `part` names the URL component for the message; the text itself is not
// shown because it is a user name or a password.
std::string percent_decode(std::string_view text, std::string_view part) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const bool has_two = i + 2 < text.size();
    const int high = has_two ? hex_digit(text[i + 1]) : -1;
    const int low = has_two ? hex_digit(text[i + 2]) : -1;
    if (high < 0 || low < 0) {
      throw InvalidValue("the " + std::string(part) +
                         " in the url has a '%' not followed by two hex digits; "
                         "write a literal '%' as %25");
    }
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

}  // namespace

long long parse_integer(std::string_view text, long long min, long long max,
                        std::string_view expected) {
  // YAML allows a leading '+'; from_chars does not.
  std::string_view digits = text;
  if (digits.size() > 1 && digits.front() == '+' && digits[1] != '-') digits.remove_prefix(1);
  long long value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || end != digits.data() + digits.size() ||
      (error != std::errc{} && error != std::errc::result_out_of_range)) {
    throw InvalidValue("expected " + std::string(expected) + ", got " + quoted(text));
  }
  if (error == std::errc::result_out_of_range || value < min || value > max) {
    throw InvalidValue(std::string(text) + " is out of range " + std::to_string(min) + ".." +
                       std::to_string(max));
  }
  return value;
}

RedisUrl parse_redis_url(std::string_view text) {
  // Split first, put the variables' values in after: see env_expansion.hpp.
  const EnvText env(text);
  const std::string_view url = env.masked();
  const std::size_t colon = url.find("://");
  const std::string scheme = lower(env.expand(url.substr(0, colon)));
  if (colon == std::string_view::npos || (scheme != "redis" && scheme != "rediss")) {
    throw InvalidValue("expected redis://[user[:password]@]host[:port][/database] (rediss:// for TLS)");
  }
  std::string_view rest = url.substr(colon + 3);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    throw InvalidValue("query parameters and fragments (?... #...) are not supported; "
                       "set connect_timeout_ms and the like as settings of their own");
  }

  RedisUrl parsed;
  parsed.tls = scheme == "rediss";
  // The last '@' ends the user info, so an unencoded '@' in a password still works.
  if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view user_info = rest.substr(0, at);
    const std::size_t sep = user_info.find(':');
    parsed.username = env.expand(percent_decode(user_info.substr(0, sep), "user name"));
    if (sep != std::string_view::npos) {
      parsed.password = env.expand(percent_decode(user_info.substr(sep + 1), "password"));
    }
    rest.remove_prefix(at + 1);
  }

  std::string_view host_port = rest;
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    host_port = rest.substr(0, slash);
    const std::string db = env.expand(rest.substr(slash + 1));
    if (!db.empty()) {
      try {
        parsed.database = static_cast<int>(parse_integer(db, 0, max_database, "a database number"));
      } catch (const InvalidValue& e) {
        throw InvalidValue(std::string("the database after '/': ") + e.what());
      }
    }
  }

  // Unset when the url has no ':port'; set (maybe empty) when it has the ':'.
  std::optional<std::string_view> port_text;
  if (!host_port.empty() && host_port.front() == '[') {  // IPv6: [::1]:6379
    const std::size_t end = host_port.find(']');
    if (end == std::string_view::npos) {
      throw InvalidValue("an IPv6 host in brackets lacks its closing ']'");
    }
    parsed.host = env.expand(host_port.substr(1, end - 1));
    const std::string_view after = host_port.substr(end + 1);
    if (!after.empty() && after.front() != ':') {
      throw InvalidValue("expected ':port' after the IPv6 host in brackets");
    }
    if (!after.empty()) port_text = after.substr(1);
  } else {
    const std::size_t sep = host_port.find(':');
    parsed.host = env.expand(host_port.substr(0, sep));
    if (sep != std::string_view::npos) port_text = host_port.substr(sep + 1);
  }
  if (parsed.host.empty()) {
    throw InvalidValue("the url has no host; expected redis://[user[:password]@]host[:port][/database]");
  }
  if (port_text) {
    try {
      parsed.port = static_cast<int>(parse_integer(env.expand(*port_text), min_port, max_port, "a port number"));
    } catch (const InvalidValue& e) {
      throw InvalidValue(std::string("the port: ") + e.what());
    }
  }
  return parsed;
}

NodeAddress parse_node_address(std::string_view text) {
  const std::string expected = "expected host:port (for example 127.0.0.1:26379), got " + quoted(text);
  NodeAddress address;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {  // IPv6: [::1]:6379
    const std::size_t end = text.find("]:");
    if (end == std::string_view::npos) throw InvalidValue(expected);
    address.host = std::string(text.substr(1, end - 1));
    port_text = text.substr(end + 2);
  } else {
    const std::size_t sep = text.rfind(':');
    if (sep == std::string_view::npos || text.substr(0, sep).find(':') != std::string_view::npos) {
      throw InvalidValue(expected);
    }
    address.host = std::string(text.substr(0, sep));
    port_text = text.substr(sep + 1);
  }
  if (address.host.empty()) throw InvalidValue(expected);
  try {
    address.port = static_cast<int>(parse_integer(port_text, min_port, max_port, "a port number"));
  } catch (const InvalidValue& e) {
    throw InvalidValue("the port of " + quoted(text) + ": " + e.what());
  }
  return address;
}

void check_redlock_nodes(const std::vector<NodeAddress>& nodes) {
  const auto same_node = [](const NodeAddress& a, const NodeAddress& b) {
    return a.port == b.port && lower(a.host) == lower(b.host);
  };
  for (auto it = nodes.begin(); it != nodes.end(); ++it) {
    if (std::any_of(nodes.begin(), it, [&](const NodeAddress& earlier) { return same_node(earlier, *it); })) {
      throw InvalidValue(to_string(*it) + " is listed twice; each node must be a distinct independent master, or "
                                          "one server would count twice toward the majority: remove the repeat");
    }
  }
  const std::string given = "lists " + std::to_string(nodes.size()) + (nodes.size() == 1 ? " node" : " nodes");
  if (nodes.size() < 3) {
    throw InvalidValue(given + "; give an odd number of independent masters, 3 or more, so that a majority is well "
                               "defined (3 keep working with one down, 5 with two)");
  }
  if (nodes.size() > max_redlock_nodes) {
    throw InvalidValue(given + "; use at most " + std::to_string(max_redlock_nodes) +
                       ": every acquisition, renewal and release goes to all the nodes, so each one adds "
                       "connections and a reply to wait for without making the lock meaningfully safer (5 or 7 "
                       "is usual)");
  }
  if (nodes.size() % 2 == 0) {
    throw InvalidValue(given + "; give an odd number of independent masters, 3 or more, so that a majority is well "
                               "defined: with an even count a split in half leaves neither side a majority, and the "
                               "extra node adds no tolerance of failures; add or remove one");
  }
}

bool parse_boolean(std::string_view text) {
  const std::string value = lower(text);
  if (value == "true" || value == "yes" || value == "on") return true;
  if (value == "false" || value == "no" || value == "off") return false;
  throw InvalidValue("expected true or false, got " + quoted(text));
}

std::optional<spdlog::level::level_enum> log_level_from_name(std::string_view name) {
  // Not spdlog::level::from_str: it maps every unknown name to "off",
  // which would silence a typo instead of reporting it.
  static constexpr std::array<std::pair<std::string_view, spdlog::level::level_enum>, 6> levels{{
      {"trace", spdlog::level::trace},
      {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},
      {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},
      {"off", spdlog::level::off},
  }};
  const std::string wanted = lower(name);
  for (const auto& [level_name, level] : levels) {
    if (level_name == wanted) return level;
  }
  return std::nullopt;
}

}  // namespace dlock::detail
