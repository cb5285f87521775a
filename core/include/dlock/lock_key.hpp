#pragma once
// Lock keys from templates, the C++ counterpart of lock4j's keys = {"#user.id"}:
//   dlock::lock_key("order:{}:{}", user_id, order_id)  → "order:7:1001" (fmt syntax, checked at compile time)
//   dlock::lock_key(some_string)                       → the string itself, braces and all

#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace dlock {

// One argument is a key as it is: never parsed as a template, so a key such
// as "a{b}" or binary bytes pass through unchanged.
inline std::string lock_key(std::string_view key) { return std::string(key); }

// A template and its values.
template <typename First, typename... Rest>
std::string lock_key(fmt::format_string<First, Rest...> pattern, First&& first, Rest&&... rest) {
  return fmt::format(pattern, std::forward<First>(first), std::forward<Rest>(rest)...);
}

}  // namespace dlock
