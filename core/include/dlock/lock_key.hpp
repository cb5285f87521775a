#pragma once
// Lock keys from templates, the C++ counterpart of lock4j's keys = {"#user.id"}:
//   dlock::lock_key("order:{}:{}", user_id, order_id)  → "order:7:1001" (fmt syntax, checked at compile time)
//   dlock::lock_key(some_string)                       → the string itself, braces and all
//
// A template is checked when it is compiled: here for as many fields as
// values ("order:{}:{}" given one value; "order", id, which would otherwise
// lock the same key "order" for every id), then by fmt for its syntax and
// the values' types. A count that differs is a compile error naming
// dlock::detail::key_template_needs_one_placeholder_per_value.

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace dlock {

namespace detail {

// Deliberately not constexpr: reached while a template is checked at compile
// time, it makes that check fail with this function's name as the message
// (g++ 12 has no computed static_assert messages; the line before the error
// shows the template and the values' types: KeyTemplate<int&>("order")).
inline void key_template_needs_one_placeholder_per_value() {}

// How many values `pattern` uses: its replacement fields, counting nested
// ones ("{:{}}" takes two) and, with explicit indexes, the highest plus one.
// fmt reports malformed templates itself; this only counts.
consteval std::size_t values_used_by(std::string_view pattern) {
  std::size_t automatic = 0;
  std::size_t highest_index_plus_one = 0;
  int depth = 0;
  bool reading_index = false;
  std::size_t index = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (depth == 0 && (c == '{' || c == '}') && i + 1 < pattern.size() && pattern[i + 1] == c) {
      ++i;  // "{{" or "}}": a literal brace
      continue;
    }
    if (c == '{') {
      ++depth;
      reading_index = true;
      index = 0;
      if (i + 1 < pattern.size() && (pattern[i + 1] < '0' || pattern[i + 1] > '9')) {
        ++automatic;
        reading_index = false;
      }
    } else if (c == '}') {
      if (reading_index) highest_index_plus_one = std::max(highest_index_plus_one, index + 1);
      reading_index = false;
      depth = std::max(depth - 1, 0);
    } else if (reading_index && c >= '0' && c <= '9') {
      index = index * 10 + static_cast<std::size_t>(c - '0');
    } else if (reading_index) {
      highest_index_plus_one = std::max(highest_index_plus_one, index + 1);
      reading_index = false;
    }
  }
  return std::max(automatic, highest_index_plus_one);
}

}  // namespace detail

// A key template and the types of its values, checked where it is written.
template <typename... Args>
struct KeyTemplate {
  template <typename Text>
    requires std::is_convertible_v<const Text&, std::string_view>
  consteval KeyTemplate(const Text& pattern) : format(counted(pattern)) {}
  fmt::format_string<Args...> format;

 private:
  // Counted before fmt parses the template: a field without a value then
  // fails here too, in one line, rather than deep in fmt's parser.
  template <typename Text>
  static consteval const Text& counted(const Text& pattern) {
    if (detail::values_used_by(std::string_view(pattern)) != sizeof...(Args)) {
      detail::key_template_needs_one_placeholder_per_value();
    }
    return pattern;
  }
};

// The key template taking values of these types, as a parameter: the types
// come from the values, not from the template (as fmt::format_string does).
template <typename... Args>
using key_template = KeyTemplate<std::type_identity_t<Args>...>;

// One argument is a key as it is: never parsed as a template, so a key such
// as "a{b}" or binary bytes pass through unchanged.
inline std::string lock_key(std::string_view key) { return std::string(key); }

// A template and its values.
template <typename First, typename... Rest>
std::string lock_key(key_template<First, Rest...> pattern, First&& first, Rest&&... rest) {
  return fmt::format(pattern.format, std::forward<First>(first), std::forward<Rest>(rest)...);
}

}  // namespace dlock
