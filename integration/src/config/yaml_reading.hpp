#pragma once
// What the YAML reader's files share: the file named in every message, one
// setting's value read with the checks its type needs, and the tables of settings.

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/config_validation.hpp"
#include "config/env_expansion.hpp"
#include "dlock/config.hpp"
#include "dlock/errors.hpp"

namespace dlock::detail {

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

std::string kind_of(const YAML::Node& node);
std::string join(const std::vector<std::string_view>& names);
// " (did you mean host?)" when `name` is close to one of `known`, else "".
std::string unknown_name_hint(std::string_view name, const std::vector<std::string_view>& known);

// One `name: value` pair of a map, with its dotted path for messages.
struct Entry {
  std::string path;
  YAML::Node key;
  YAML::Node value;
  int line() const { return Source::line_of(key); }
};

// The pairs of `map` in file order. yaml-cpp keeps both pairs of a key given
// twice, and a lookup would silently pick one, so duplicates are caught here.
std::vector<Entry> entries_of(const YAML::Node& map, const std::string& prefix, const Source& source);

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
  std::vector<NodeAddress> addresses(std::string_view example) const;

  // A list of non-empty texts, or one text alone (a list of one).
  std::vector<std::string> texts(std::string_view example) const;

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

// The settings of each of dlock's sections (yaml_settings.cpp).
const Settings& redis_settings();
const Settings& lock_settings();
const Settings& logging_settings();

// `root` holds dlock's sections (redis, lock, logging); `path` is its dotted
// path in the file ("" for the whole file), which messages put in front of
// every setting's name.
void read_document(const YAML::Node& root, const std::string& path, const Source& source, Config& config);

}  // namespace dlock::detail
