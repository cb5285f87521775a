#pragma once
// ${VAR}, ${VAR:-default} and $${ (a literal "${") in config values.
//
// Expansion resolves the references first and puts their values in last, so
// a value that has a structure of its own (redis.url) is split into its parts
// before any variable's value is put in: a password from the environment
// that holds '%41', '#', '?', '@' or '/' means itself, never url syntax.

#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {

class EnvText {
 public:
  // Resolves every reference in `text`. Throws InvalidValue for an unset
  // ${VAR} without default, a malformed ${...}, or a control character 0x1F
  // (which marks the references, see masked()).
  explicit EnvText(std::string_view text);

  // The text with each reference replaced by a marker that holds no
  // character a url gives meaning to. Split this, then expand() each part.
  const std::string& masked() const { return masked_; }

  // A part of masked() with its markers replaced by the values they stand for.
  std::string expand(std::string_view part) const;

 private:
  std::string masked_;
  std::vector<std::string> values_;  // by marker number
};

// The whole text expanded: EnvText(text).expand(masked()).
std::string expand_env(std::string_view text);

}  // namespace dlock::detail
