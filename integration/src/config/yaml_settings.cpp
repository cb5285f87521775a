// The settings dlock knows, section by section: each name with the check and
// the Config field its value goes to.

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>

#include "config/yaml_reading.hpp"

namespace dlock::detail {
namespace {

const Settings& tls_settings() {
  static const Settings settings{
      {"enabled", [](const Value& v, Config& c) { c.redis.tls.enabled = v.boolean(); }},
      {"ca_file", [](const Value& v, Config& c) { c.redis.tls.ca_file = v.text(); }},
      {"cert_file", [](const Value& v, Config& c) { c.redis.tls.cert_file = v.text(); }},
      {"key_file", [](const Value& v, Config& c) { c.redis.tls.key_file = v.text(); }},
      {"server_name", [](const Value& v, Config& c) { c.redis.tls.server_name = v.text(); }},
      {"verify", [](const Value& v, Config& c) { c.redis.tls.verify = v.boolean(); }},
  };
  return settings;
}

const Settings& sentinel_settings() {
  static const Settings settings{
      {"master_name",
       [](const Value& v, Config& c) { c.redis.sentinel.master_name = v.non_empty_text("mymaster"); }},
      {"nodes",
       [](const Value& v, Config& c) { c.redis.sentinel.nodes = v.addresses("[\"127.0.0.1:26379\"]"); }},
      {"username", [](const Value& v, Config& c) { c.redis.sentinel.username = v.text(); }},
      {"password", [](const Value& v, Config& c) { c.redis.sentinel.password = v.text(); }},
  };
  return settings;
}

const Settings& cluster_settings() {
  static const Settings settings{
      {"nodes", [](const Value& v, Config& c) { c.redis.cluster.nodes = v.addresses("[\"127.0.0.1:7000\"]"); }},
  };
  return settings;
}

const Settings& redlock_settings() {
  static const Settings settings{
      {"nodes",
       [](const Value& v, Config& c) {
         auto nodes = v.addresses("[\"10.0.0.1:6379\", \"10.0.0.2:6379\", \"10.0.0.3:6379\"]");
         v.guarded([&] { detail::check_redlock_nodes(nodes); });
         c.redis.redlock.nodes = std::move(nodes);
       }},
      {"restarted_node_delay_ms",
       [](const Value& v, Config& c) { c.redis.redlock.restarted_node_delay = v.millis(0, 86400000); }},
  };
  return settings;
}

RedisMode mode_from(const Value& v) {
  const std::string name = v.text();
  if (name == "standalone") return RedisMode::standalone;
  if (name == "sentinel") return RedisMode::sentinel;
  if (name == "cluster") return RedisMode::cluster;
  if (name == "redlock") return RedisMode::redlock;
  v.fail("\"" + name + "\" is not a mode; use standalone, sentinel, cluster or redlock");
}

}  // namespace

const Settings& redis_settings() {
  static const Settings settings{
      {"mode", [](const Value& v, Config& c) { c.redis.mode = mode_from(v); }},
      {"url",
       [](const Value& v, Config& c) {
         const auto url = v.guarded([&] { return detail::parse_redis_url(v.raw_text()); });
         c.redis.host = url.host;
         c.redis.port = url.port;
         c.redis.username = url.username;
         c.redis.password = url.password;
         c.redis.database = url.database;
         if (url.tls) c.redis.tls.enabled = true;
       }},
      {"host", [](const Value& v, Config& c) { c.redis.host = v.non_empty_text("127.0.0.1"); }},
      {"port",
       [](const Value& v, Config& c) {
         c.redis.port = static_cast<int>(v.integer(detail::min_port, detail::max_port, "a port number"));
       }},
      {"username", [](const Value& v, Config& c) { c.redis.username = v.text(); }},
      {"password", [](const Value& v, Config& c) { c.redis.password = v.text(); }},
      {"database",
       [](const Value& v, Config& c) {
         c.redis.database = static_cast<int>(v.integer(0, detail::max_database, "a database number"));
       }},
      {"connect_timeout_ms",
       [](const Value& v, Config& c) { c.redis.connect_timeout = v.millis(1, 600000); }},
      {"command_timeout_ms",
       [](const Value& v, Config& c) { c.redis.command_timeout = v.millis(1, 600000); }},
      {"pool_size",
       [](const Value& v, Config& c) {
         c.redis.pool_size = static_cast<std::size_t>(v.integer(1, 1024, "a number of connections"));
       }},
      {"tls", nullptr, &tls_settings},
      {"sentinel", nullptr, &sentinel_settings},
      {"cluster", nullptr, &cluster_settings},
      {"redlock", nullptr, &redlock_settings},
  };
  return settings;
}

// lock.metrics: the gauges' breakdown by key prefix (MetricsConfig).
const Settings& metrics_settings() {
  static const Settings settings{
      {"key_prefixes",
       [](const Value& v, Config& c) {
         auto prefixes = v.texts("[\"order:\", \"stock:\"]");
         for (const std::string& prefix : prefixes) {
           if (prefix == "other") v.fail("lists \"other\", the series of keys no prefix matches; choose another name");
           if (std::count(prefixes.begin(), prefixes.end(), prefix) > 1) {
             v.fail("lists \"" + prefix + "\" twice; list each prefix once");
           }
         }
         c.lock.metrics.key_prefixes = std::move(prefixes);
       }},
      {"key_prefix_separator",
       [](const Value& v, Config& c) { c.lock.metrics.key_prefix_separator = v.non_empty_text("\":\""); }},
      {"max_key_prefixes",
       [](const Value& v, Config& c) {
         c.lock.metrics.max_key_prefixes = static_cast<std::size_t>(v.integer(1, 1000, "a number of series"));
       }},
  };
  return settings;
}

const Settings& lock_settings() {
  static const Settings settings{
      {"key_prefix",
       [](const Value& v, Config& c) {
         std::string prefix = v.non_empty_text("\"dlock:\" (an empty prefix would mix lock keys "
                                               "with the application's own keys)");
         if (prefix.size() > 256) {
           v.fail("is " + std::to_string(prefix.size()) + " bytes long; use at most 256 bytes");
         }
         if (prefix.find_first_of("{}") != std::string::npos) {
           v.fail("holds a brace; each lock key is put in braces after the prefix (a Redis Cluster hash tag), "
                  "and a brace in the prefix would take their place: use a prefix without '{' or '}'");
         }
         c.lock.key_prefix = std::move(prefix);
       }},
      {"watchdog_timeout_ms",
       [](const Value& v, Config& c) {
         // A lease under 100 ms leaves too little time to renew it every lease/3.
         c.lock.watchdog_timeout = v.millis(100, 86400000);
       }},
      {"wait_ms", [](const Value& v, Config& c) { c.lock.wait = v.millis(0, 86400000); }},
      {"max_key_bytes",
       [](const Value& v, Config& c) {
         c.lock.max_key_bytes = static_cast<std::size_t>(v.integer(1, 1048576, "a number of bytes"));
       }},
      {"turn_window_ms",
       [](const Value& v, Config& c) {
         // Waiters re-confirm their place every third of it: under 30 ms that is a poll loop.
         c.lock.turn_window = v.millis(30, 600000);
       }},
      {"fence_retention_ms",
       [](const Value& v, Config& c) { c.lock.fence_retention = v.millis(100, 3153600000000LL); }},
      {"replica_acks",
       [](const Value& v, Config& c) {
         c.lock.replica_acks = static_cast<int>(v.integer(0, 100, "a number of replicas"));
       }},
      {"replica_ack_timeout_ms",
       [](const Value& v, Config& c) { c.lock.replica_ack_timeout = v.millis(1, 60000); }},
      {"async_io_threads",
       [](const Value& v, Config& c) {
         c.lock.async_io_threads = static_cast<std::size_t>(v.integer(1, 64, "a number of threads"));
       }},
      {"metrics", nullptr, &metrics_settings},
  };
  return settings;
}

const Settings& logging_settings() {
  static const Settings settings{
      {"level",
       [](const Value& v, Config& c) {
         std::string level = v.text();
         if (!detail::log_level_from_name(level)) {
           v.fail("\"" + level + "\" is not a log level; use one of " +
                  std::string(detail::log_level_names));
         }
         std::transform(level.begin(), level.end(), level.begin(),
                        [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
         c.logging.level = std::move(level);
       }},
  };
  return settings;
}

}  // namespace dlock::detail
