// ${VAR}, ${VAR:-default} and $${ in config values: references replaced by markers first and
// their values put in last, so that a value never adds syntax to a URL.
#include "config/env_expansion.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "config/config_validation.hpp"

namespace dlock::detail {
namespace {

// A marker is kMark, the value's number in decimal, kMark.
constexpr char kMark = '\x1f';

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool is_variable_name(std::string_view name) {
  return !name.empty() && is_name_start(name.front()) && std::all_of(name.begin() + 1, name.end(), is_name_char);
}

// The value of ${inside}, where inside is VAR or VAR:-default.
std::string resolve(std::string_view inside) {
  const std::size_t dash = inside.find(":-");
  const std::string_view name = inside.substr(0, dash);
  if (!is_variable_name(name)) {
    throw InvalidValue("${" + std::string(inside) +
                       "} does not name an environment variable; write ${VAR} or "
                       "${VAR:-default} with VAR made of letters, digits and '_' (and $${ for a literal ${)");
  }
  const std::string name_text(name);
  const char* value = std::getenv(name_text.c_str());
  if (dash != std::string_view::npos) {
    return (value != nullptr && *value != '\0') ? std::string(value) : std::string(inside.substr(dash + 2));
  }
  if (value == nullptr) {
    throw InvalidValue("environment variable " + name_text + " is not set; set it, or give a default with ${" +
                       name_text + ":-default}");
  }
  return value;
}

}  // namespace

EnvText::EnvText(std::string_view text) {
  if (text.find(kMark) != std::string_view::npos) {
    throw InvalidValue("contains the control character 0x1F, which a config value may not hold");
  }
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t open = text.find("${", pos);
    if (open == std::string_view::npos) break;
    // "$${" is a literal "${": the first '$' escapes the rest.
    const bool escaped = open > pos && text[open - 1] == '$';
    masked_.append(text.substr(pos, open - pos - (escaped ? 1 : 0)));
    std::string value;
    if (escaped) {
      value = "${";
      pos = open + 2;
    } else {
      const std::size_t close = text.find('}', open + 2);
      if (close == std::string_view::npos) {
        throw InvalidValue("\"${\" without a closing \"}\"; write ${VAR} or ${VAR:-default}, or $${ for a literal ${");
      }
      value = resolve(text.substr(open + 2, close - open - 2));
      pos = close + 1;
    }
    masked_ += kMark + std::to_string(values_.size()) + kMark;
    values_.push_back(std::move(value));
  }
  if (pos < text.size()) masked_.append(text.substr(pos));
}

std::string EnvText::expand(std::string_view part) const {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t open; (open = part.find(kMark, pos)) != std::string_view::npos;) {
    const std::size_t close = part.find(kMark, open + 1);
    out.append(part.substr(pos, open - pos));
    out += values_.at(std::stoul(std::string(part.substr(open + 1, close - open - 1))));
    pos = close + 1;
  }
  out.append(part.substr(pos));
  return out;
}

std::string expand_env(std::string_view text) {
  const EnvText expanded(text);
  return expanded.expand(expanded.masked());
}

}  // namespace dlock::detail
