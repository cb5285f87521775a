// The walk of a config document against the tables of settings, and the rules
// that tie settings together once the whole document is read.

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/yaml_reading.hpp"

namespace dlock::detail {
namespace {

std::vector<std::string_view> names_of(const Settings& settings) {
  std::vector<std::string_view> names;
  for (const auto& setting : settings) names.push_back(setting.name);
  return names;
}

// A url already says host, port, user, password and database; a second source
// for the same thing would leave the reader guessing which one wins.
void reject_url_conflicts(const std::vector<Entry>& entries, const Source& source) {
  const auto url = std::find_if(entries.begin(), entries.end(),
                                [](const Entry& e) { return e.key.Scalar() == "url"; });
  if (url == entries.end()) return;
  for (const auto& entry : entries) {
    const std::string& name = entry.key.Scalar();
    if (name == "host" || name == "port" || name == "username" || name == "password" ||
        name == "database") {
      source.fail(entry.line(),
                  entry.path + ": cannot be combined with redis.url (line " +
                      std::to_string(url->line()) +
                      "); use one or the other: put it in the url, or drop the url and use "
                      "host, port, username, password and database");
    }
  }
}

// Where each setting given was, by its path below the file's dlock section
// ("redis.mode"), for the checks that involve more than one setting.
using SeenLines = std::map<std::string, int>;

void read_section(const Entry& section, const std::string& relative_path, const Settings& settings,
                  const Source& source, Config& config, SeenLines& seen) {
  // `redis:` with nothing under it is an empty section: all defaults.
  if (section.value.IsNull()) return;
  if (!section.value.IsMap()) {
    source.fail(section.line(), section.path + ": expected a map of settings (name: value), got " +
                                    kind_of(section.value));
  }
  const auto entries = entries_of(section.value, section.path, source);
  if (&settings == &redis_settings()) reject_url_conflicts(entries, source);
  for (const auto& entry : entries) {
    const auto setting = std::find_if(settings.begin(), settings.end(), [&](const Setting& s) {
      return s.name == entry.key.Scalar();
    });
    if (setting == settings.end()) {
      const auto known = names_of(settings);
      source.fail(entry.line(), entry.path + ": unknown setting" +
                                    unknown_name_hint(entry.key.Scalar(), known) +
                                    "; known settings in " + section.path + ": " + join(known));
    }
    const std::string relative = relative_path + "." + entry.key.Scalar();
    // A setting written without a value (`port:`) keeps its default.
    if (entry.value.IsNull()) continue;
    seen[relative] = entry.line();
    if (setting->section != nullptr) {
      read_section(entry, relative, setting->section(), source, config, seen);
    } else {
      setting->apply(Value(entry, source), config);
    }
  }
}

// The rules that tie settings together, checked once the whole file is read.
// `path` is the dlock section's dotted path ("" for the whole file).
void check_combinations(const Config& config, const SeenLines& seen, const std::string& path,
                        const Source& source) {
  const auto full = [&](const std::string& relative) { return path.empty() ? relative : path + "." + relative; };
  const auto line = [&](const std::string& relative) {
    const auto it = seen.find(relative);
    return it == seen.end() ? 0 : it->second;
  };
  const auto given = [&](const std::string& relative) { return seen.count(relative) != 0; };
  const RedisMode mode = config.redis.mode;
  const std::string mode_text = std::string("redis.mode is ") + mode_name(mode);

  for (const auto& [section, wanted] : {std::pair{std::string("redis.sentinel"), RedisMode::sentinel},
                                        std::pair{std::string("redis.cluster"), RedisMode::cluster},
                                        std::pair{std::string("redis.redlock"), RedisMode::redlock}}) {
    if (given(section) && mode != wanted) {
      source.fail(line(section), full(section) + ": is set but " + mode_text + "; add `mode: " +
                                     mode_name(wanted) + "` under redis, or remove " + full(section));
    }
  }
  if (mode == RedisMode::sentinel && config.redis.sentinel.nodes.empty()) {
    source.fail(line("redis.mode"), full("redis.sentinel.nodes") +
                                        ": must list the Sentinels (host:port) when redis.mode is sentinel");
  }
  if (mode == RedisMode::cluster && config.redis.cluster.nodes.empty()) {
    source.fail(line("redis.mode"), full("redis.cluster.nodes") +
                                        ": must list at least one cluster node (host:port) when redis.mode is cluster");
  }
  if (mode == RedisMode::redlock && config.redis.redlock.nodes.empty()) {
    source.fail(line("redis.mode"), full("redis.redlock.nodes") +
                                        ": must list the independent masters (host:port; an odd number, 3 or more) "
                                        "when redis.mode is redlock");
  }
  if (mode != RedisMode::standalone) {
    for (const char* name : {"redis.url", "redis.host", "redis.port"}) {
      if (given(name)) {
        source.fail(line(name), full(name) + ": not used when " + mode_text + " (the servers come from " +
                                    full(std::string("redis.") + mode_name(mode) + ".nodes") +
                                    "); remove it, and give the password as redis.password");
      }
    }
  }
  if (mode == RedisMode::redlock && config.lock.replica_acks != 0) {
    source.fail(line("lock.replica_acks"),
                full("lock.replica_acks") + ": is " + std::to_string(config.lock.replica_acks) +
                    " but must be 0 when " + mode_text +
                    ": Redlock's nodes are independent masters, and a lock is had when a majority of them grant "
                    "it, not when replicas copy it (replica acknowledgement is for standalone, sentinel and "
                    "cluster masters with replicas); remove lock.replica_acks");
  }
  const MetricsConfig& metrics = config.lock.metrics;
  if (metrics.key_prefixes.size() > metrics.max_key_prefixes) {
    const std::string name =
        given("lock.metrics.max_key_prefixes") ? "lock.metrics.max_key_prefixes" : "lock.metrics.key_prefixes";
    source.fail(line(name), full("lock.metrics.key_prefixes") + ": lists " +
                                std::to_string(metrics.key_prefixes.size()) + " prefixes, more than " +
                                full("lock.metrics.max_key_prefixes") + " (" +
                                std::to_string(metrics.max_key_prefixes) +
                                "), the bound on series; list fewer or raise the bound");
  }
  const Millis restarted_node_delay = config.redis.redlock.restarted_node_delay;
  if (mode == RedisMode::redlock && restarted_node_delay.count() > 0 &&
      restarted_node_delay < config.lock.watchdog_timeout) {
    const std::string name = given("redis.redlock.restarted_node_delay_ms") ? "redis.redlock.restarted_node_delay_ms"
                                                                             : "lock.watchdog_timeout_ms";
    source.fail(line(name), full("redis.redlock.restarted_node_delay_ms") + ": " +
                                std::to_string(restarted_node_delay.count()) +
                                " ms is shorter than lock.watchdog_timeout_ms (" +
                                std::to_string(config.lock.watchdog_timeout.count()) +
                                " ms): a restarted node may have lost the locks it held, so it must sit out at "
                                "least the longest lease before its grants count again; raise it to at least " +
                                std::to_string(config.lock.watchdog_timeout.count()) +
                                ", or set 0 with nodes that persist every write (appendonly yes, appendfsync always)");
  }
  if (config.lock.replica_acks > 0 && config.lock.replica_ack_timeout >= config.redis.command_timeout) {
    const std::string name = given("lock.replica_ack_timeout_ms") ? "lock.replica_ack_timeout_ms" : "lock.replica_acks";
    source.fail(line(name), full("lock.replica_ack_timeout_ms") + ": " +
                                std::to_string(config.lock.replica_ack_timeout.count()) +
                                " ms must be shorter than redis.command_timeout_ms (" +
                                std::to_string(config.redis.command_timeout.count()) +
                                " ms): a WAIT that outlasts the command timeout breaks its connection");
  }
  if (mode == RedisMode::cluster && config.redis.database != 0) {
    source.fail(line("redis.database"), full("redis.database") +
                                            ": a Redis Cluster has only database 0; remove redis.database");
  }
  const TlsConfig& tls = config.redis.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    const std::string set = tls.cert_file.empty() ? "redis.tls.key_file" : "redis.tls.cert_file";
    const std::string missing = tls.cert_file.empty() ? "redis.tls.cert_file" : "redis.tls.key_file";
    source.fail(line(set), full(set) + ": is set without " + full(missing) +
                               "; a client certificate needs both the certificate and its key");
  }
  if (!tls.enabled) {
    for (const auto& [name, value] : {std::pair{"redis.tls.ca_file", &tls.ca_file},
                                      std::pair{"redis.tls.cert_file", &tls.cert_file},
                                      std::pair{"redis.tls.server_name", &tls.server_name}}) {
      if (!value->empty()) {
        source.fail(line(name), full(name) + ": is set but TLS is off; add `enabled: true` under redis.tls "
                                             "(or use a rediss:// url), or remove it");
      }
    }
  }
}

}  // namespace

void read_document(const YAML::Node& root, const std::string& path, const Source& source, Config& config) {
  if (root.IsNull()) return;  // an empty file or section: all defaults
  if (!root.IsMap()) {
    source.fail(root, (path.empty() ? "" : path + ": ") +
                          "expected a map of sections (redis, lock, logging), got " + kind_of(root));
  }
  static const std::vector<std::pair<std::string_view, const Settings*>> sections{
      {"redis", &redis_settings()}, {"lock", &lock_settings()}, {"logging", &logging_settings()}};
  SeenLines seen;
  for (const auto& entry : entries_of(root, path, source)) {
    const std::string& name = entry.key.Scalar();
    const auto section =
        std::find_if(sections.begin(), sections.end(), [&](const auto& s) { return s.first == name; });
    if (section == sections.end()) {
      const std::vector<std::string_view> known{"redis", "lock", "logging"};
      source.fail(entry.line(), entry.path + ": unknown section" + unknown_name_hint(name, known) +
                                    "; known sections: " + join(known));
    }
    read_section(entry, name, *section->second, source, config, seen);
  }
  check_combinations(config, seen, path, source);
}

}  // namespace dlock::detail
