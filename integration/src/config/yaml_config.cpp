// load_config: reads the YAML file, walks it against the known settings and
// reports anything it cannot use as "FILE:LINE: setting: problem; what to do".

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include "config/config_validation.hpp"
#include "config/env_expansion.hpp"
#include "dlock/config.hpp"
#include "dlock/errors.hpp"

namespace dlock {
namespace {

using detail::InvalidValue;

// Reading a config is a start-up step; a file this big is the wrong path, and
// yaml-cpp would otherwise spend seconds and a lot of memory on it.
constexpr std::size_t max_file_bytes = 1024 * 1024;

// The file being read, for the "FILE:LINE: " in front of every message.
class Source {
 public:
  explicit Source(std::string name) : name_(std::move(name)) {}

  // `line` is 1-based.
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw ConfigError(name_ + ":" + std::to_string(std::max(line, 1)) + ": " + what);
  }
  // For what is not at any line: the file as a whole (missing, unreadable,
  // too large), an environment variable, a section that is not there.
  [[noreturn]] void fail_whole(const std::string& what) const { throw ConfigError(name_ + ": " + what); }
  [[noreturn]] void fail(const YAML::Node& at, const std::string& what) const {
    fail(line_of(at), what);
  }
  static int line_of(const YAML::Node& node) { return node.Mark().line + 1; }

 private:
  std::string name_;
};

std::string kind_of(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: return "a single value";
    default: return "nothing";
  }
}

std::string join(const std::vector<std::string_view>& names) {
  std::string out;
  for (const auto name : names) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

// Edit distance, to turn "hots" into "did you mean host?".
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string unknown_name_hint(std::string_view name, const std::vector<std::string_view>& known) {
  for (const auto candidate : known) {
    if (distance(name, candidate) <= 2) return " (did you mean " + std::string(candidate) + "?)";
  }
  return "";
}

// One `name: value` pair of a map, with its dotted path for messages.
struct Entry {
  std::string path;
  YAML::Node key;
  YAML::Node value;
  int line() const { return Source::line_of(key); }
};

// The pairs of `map` in file order. yaml-cpp keeps both pairs of a key given
// twice, and a lookup would silently pick one, so duplicates are caught here.
std::vector<Entry> entries_of(const YAML::Node& map, const std::string& prefix,
                              const Source& source) {
  std::vector<Entry> entries;
  std::map<std::string, int> first_line;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      source.fail(key, (prefix.empty() ? "" : prefix + ": ") +
                           "a setting name must be a plain word, got " + kind_of(key));
    }
    Entry entry{prefix.empty() ? key.Scalar() : prefix + "." + key.Scalar(), key, it->second};
    if (const auto [seen, inserted] = first_line.emplace(key.Scalar(), entry.line()); !inserted) {
      source.fail(key, entry.path + ": set twice (first at line " + std::to_string(seen->second) +
                           "); keep one of them");
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

// The value of one setting, read with the checks its type needs.
class Value {
 public:
  Value(const Entry& entry, const Source& source) : entry_(entry), source_(source) {}

  [[noreturn]] void fail(const std::string& what) const {
    source_.fail(entry_.line(), entry_.path + ": " + what);
  }

  // Runs a detail:: check, putting FILE:LINE: setting: in front of its complaint.
  template <typename F>
  auto guarded(F&& check) const {
    try {
      return check();
    } catch (const InvalidValue& e) {
      fail(e.what());
    }
  }

  // The scalar as written, ${VAR} references and all.
  const std::string& raw_text() const {
    if (!entry_.value.IsScalar()) fail("expected a single value, got " + kind_of(entry_.value));
    return entry_.value.Scalar();
  }

  // The scalar with ${VAR} expanded.
  std::string text() const {
    const std::string& raw = raw_text();
    return guarded([&] { return detail::expand_env(raw); });
  }

  std::string non_empty_text(std::string_view example) const {
    std::string value = text();
    if (value.empty()) fail("must not be empty; for example " + std::string(example));
    return value;
  }

  long long integer(long long min, long long max, std::string_view expected) const {
    const std::string value = text();
    return guarded([&] { return detail::parse_integer(value, min, max, expected); });
  }

  Millis millis(long long min, long long max) const {
    return Millis{integer(min, max, "an integer number of milliseconds")};
  }

  bool boolean() const {
    const std::string value = text();
    return guarded([&] { return detail::parse_boolean(value); });
  }

  // A list of host:port, or one value with them separated by commas (so that
  // one ${VAR} can hold them all). At least one.
  std::vector<NodeAddress> addresses(std::string_view example) const {
    std::vector<std::string> texts;
    if (entry_.value.IsSequence()) {
      for (std::size_t i = 0; i < entry_.value.size(); ++i) {
        const YAML::Node item = entry_.value[i];
        if (!item.IsScalar()) {
          fail("item " + std::to_string(i + 1) + " is " + kind_of(item) + "; expected host:port");
        }
        texts.push_back(guarded([&] { return detail::expand_env(item.Scalar()); }));
      }
    } else {
      const std::string all = text();
      for (std::size_t start = 0; start <= all.size();) {
        const std::size_t comma = std::min(all.find(',', start), all.size());
        texts.push_back(all.substr(start, comma - start));
        start = comma + 1;
      }
    }
    std::vector<NodeAddress> out;
    for (std::string& item : texts) {
      const auto first = item.find_first_not_of(' ');
      item = first == std::string::npos ? "" : item.substr(first, item.find_last_not_of(' ') - first + 1);
      if (item.empty()) continue;
      out.push_back(guarded([&] { return detail::parse_node_address(item); }));
    }
    if (out.empty()) fail("lists no server; give at least one host:port, for example " + std::string(example));
    return out;
  }

  int line() const { return entry_.line(); }

 private:
  const Entry& entry_;
  const Source& source_;
};

struct Setting;
using Settings = std::vector<Setting>;

struct Setting {
  std::string_view name;
  std::function<void(const Value&, Config&)> apply;
  // Set for a section inside a section (redis.tls): its value is a map of these.
  const Settings& (*section)() = nullptr;
};

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

// `root` holds dlock's sections (redis, lock, logging); `path` is its dotted
// path in the file ("" for the whole file), which messages put in front of
// every setting's name.
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

// The node at the dotted `section` path ("dlock", "services.dlock") of a
// file that holds other settings too; everything outside it is the
// service's own business and is not looked at.
YAML::Node find_section(const YAML::Node& root, const std::string& section, const Source& source) {
  YAML::Node node = root;
  std::string path;
  for (std::size_t start = 0; start <= section.size();) {
    const std::size_t dot = std::min(section.find('.', start), section.size());
    const std::string name = section.substr(start, dot - start);
    start = dot + 1;
    const std::string where = path.empty() ? "at the top level" : "in " + path;
    path += (path.empty() ? "" : ".") + name;
    if (!node.IsMap() && !node.IsNull()) {  // null: an empty file or section, with no sections at all
      source.fail(node, "looking for the section " + path + ": expected a map " + where + ", got " + kind_of(node));
    }
    std::vector<std::string_view> names;
    std::optional<YAML::Node> found;
    int found_line = 0;
    for (auto it = node.begin(); node.IsMap() && it != node.end(); ++it) {
      if (!it->first.IsScalar()) continue;
      if (it->first.Scalar() == name) {
        if (found) {
          source.fail(it->first, path + ": set twice (first at line " + std::to_string(found_line) +
                                     "); keep one of them");
        }
        found = it->second;
        found_line = Source::line_of(it->first);
      } else {
        names.push_back(it->first.Scalar());
      }
    }
    if (!found) {
      source.fail_whole("no section " + path + " " + where + unknown_name_hint(name, names) +
                        (names.empty() ? "" : "; found " + join(names)) + "; add a `" + name +
                        ":` section with dlock's settings (redis, lock, logging)");
    }
    node = *found;
  }
  return node;
}

// The environment wins over the file, so a deployment can point the same
// file at another server or inject a secret.
void apply_environment(const Source& source, Config& config) {
  try {
    apply_environment_overrides(config);
  } catch (const ConfigError& e) {
    source.fail_whole(e.what());
  }
}

[[noreturn]] void fail_too_large(const Source& source) {
  source.fail_whole("the config is larger than 1 MiB; a dlock config is a few lines, so check that the path "
                    "names the right file");
}

// Reads the whole file with POSIX calls, which report why a read failed
// (errno) where an ifstream only says that it did.
std::string read_file(const std::filesystem::path& path, const Source& source) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer that never comes.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    source.fail_whole(std::string("cannot open the config file: ") + std::strerror(errno) +
                      "; check the path given for the dlock config");
  }
  struct stat info {};
  if (::fstat(fd, &info) == 0 && (S_ISFIFO(info.st_mode) || S_ISSOCK(info.st_mode))) {
    ::close(fd);
    source.fail_whole("the config path is a pipe or socket, not a file; give the path of a YAML file");
  }
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      source.fail_whole(std::string("cannot read the config file: ") + std::strerror(error) +
                        "; give the path of a readable YAML file");
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > max_file_bytes) {
      ::close(fd);
      fail_too_large(source);
    }
  }
  ::close(fd);
  return text;
}

// yaml-cpp reports an indentation tab as "illegal map value" and the like,
// which does not say what to change.
std::string tab_hint(const std::string& text, int line) {
  std::size_t start = 0;
  for (int i = 0; i < line && start != std::string::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  if (line < 0 || start == std::string::npos) return "";
  const std::size_t indent_end = text.find_first_not_of(" \t", start);
  const bool tab_in_indent =
      text.find('\t', start) < std::min(indent_end, text.find('\n', start));
  return tab_in_indent ? " (this line is indented with a tab; YAML allows only spaces)" : "";
}

// Listens to a parse without building anything; only the second document's start matters.
class SecondDocumentFinder : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> second_start;
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ == 2) second_start = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  int documents_ = 0;
};

// The start of a second document, if the text has one. At most two
// documents are parsed: yaml-cpp 0.7's LoadAll never ends on some malformed
// input (a leading ',') while its parser keeps yielding empty documents.
std::optional<YAML::Mark> second_document(const std::string& text) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  SecondDocumentFinder finder;
  if (parser.HandleNextDocument(finder)) parser.HandleNextDocument(finder);
  return finder.second_start;
}

// The text of a config, its source named for messages, read as documented in config.hpp.
Config parse(const std::string& text, const Source& source, const std::string& section) {
  Config config;
  try {
    if (text.size() > max_file_bytes) fail_too_large(source);
    const YAML::Node document = YAML::Load(text);
    if (auto second = second_document(text)) {
      source.fail(second->line + 1, "a second YAML document (after \"---\"); put all settings in one document");
    }
    if (section.empty()) {
      read_document(document, "", source, config);
    } else {
      read_document(find_section(document, section, source), section, source, config);
    }
    apply_environment(source, config);
  } catch (const ConfigError&) {
    throw;
  } catch (const YAML::Exception& e) {
    // ParserException and friends: the mark is 0-based, or -1 when unknown.
    source.fail(e.mark.line + 1, "malformed YAML: " + e.msg + tab_hint(text, e.mark.line));
  } catch (const std::exception& e) {
    source.fail_whole(std::string("cannot load the config: ") + e.what());
  }
  return config;
}

void check_section_name(const std::string& section, const Source& source) {
  const bool empty_part = section.empty() || section.front() == '.' || section.back() == '.' ||
                          section.find("..") != std::string::npos;
  if (empty_part) {
    source.fail_whole("the section to read, \"" + section + "\", is not a dotted path such as \"dlock\" or "
                      "\"services.dlock\"; pass one, or none to read the whole file");
  }
}

}  // namespace

const char* mode_name(RedisMode mode) {
  switch (mode) {
    case RedisMode::sentinel: return "sentinel";
    case RedisMode::cluster: return "cluster";
    case RedisMode::redlock: return "redlock";
    default: return "standalone";
  }
}

std::string to_string(const NodeAddress& address) {
  const bool ipv6 = address.host.find(':') != std::string::npos;
  return (ipv6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

Config load_config(const std::filesystem::path& yaml) { return load_config(yaml, std::string()); }

Config load_config(const std::filesystem::path& yaml, const std::string& section) {
  const Source source(yaml.string());
  if (!section.empty()) check_section_name(section, source);
  return parse(read_file(yaml, source), source, section);
}

Config parse_config(const std::string& yaml_text, const std::string& source_name, const std::string& section) {
  const Source source(source_name);
  if (!section.empty()) check_section_name(section, source);
  return parse(yaml_text, source, section);
}

}  // namespace dlock
