// The reading helpers behind every message: what a node is, near-miss names,
// a map's pairs with duplicates caught, and a list of servers read as one setting.

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/yaml_reading.hpp"

namespace dlock::detail {
namespace {

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

}  // namespace

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

std::string unknown_name_hint(std::string_view name, const std::vector<std::string_view>& known) {
  for (const auto candidate : known) {
    if (distance(name, candidate) <= 2) return " (did you mean " + std::string(candidate) + "?)";
  }
  return "";
}

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

std::vector<NodeAddress> Value::addresses(std::string_view example) const {
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

std::vector<std::string> Value::texts(std::string_view example) const {
  if (!entry_.value.IsSequence()) return {non_empty_text(example)};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < entry_.value.size(); ++i) {
    const YAML::Node item = entry_.value[i];
    if (!item.IsScalar()) fail("item " + std::to_string(i + 1) + " is " + kind_of(item) + "; expected a text");
    out.push_back(guarded([&] { return detail::expand_env(item.Scalar()); }));
    if (out.back().empty()) {
      fail("item " + std::to_string(i + 1) + " is empty; give a non-empty text, for example " + std::string(example));
    }
  }
  return out;
}

}  // namespace dlock::detail
