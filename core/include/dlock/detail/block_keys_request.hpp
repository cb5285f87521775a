#pragma once
// The arguments of the multi-lock block forms (macros.hpp), in the order a
// user writes them: (keys) (keys, options) (template, values) (template,
// values, options), where keys is any range of strings or a braced list, and
// values any range whose elements fill the template's one field.

#include <initializer_list>
#include <ranges>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "dlock/lock_key.hpp"
#include "dlock/lock_options.hpp"

namespace dlock::detail {

struct BlockKeysRequest {
  std::vector<std::string> keys;
  BlockOptions options;
};

template <typename Keys>
concept key_range = std::ranges::input_range<Keys> &&
                    std::convertible_to<std::ranges::range_reference_t<Keys>, std::string_view>;

template <key_range Keys>
BlockKeysRequest block_keys_request(const Keys& keys, BlockOptions options = {}) {
  BlockKeysRequest request{{}, options};
  for (auto&& key : keys) request.keys.emplace_back(std::string_view(key));
  return request;
}

inline BlockKeysRequest block_keys_request(std::initializer_list<std::string_view> keys, BlockOptions options = {}) {
  return {std::vector<std::string>(keys.begin(), keys.end()), options};
}

// A template of one field and the values that fill it, one key per value.
template <std::ranges::input_range Values>
BlockKeysRequest block_keys_request(key_template<std::ranges::range_value_t<Values>> pattern, const Values& values,
                                    BlockOptions options = {}) {
  BlockKeysRequest request{{}, options};
  // The template was checked against the values' type where it was written; format each value by it.
  for (const auto& value : values) {
    request.keys.push_back(fmt::vformat(fmt::string_view(pattern.format), fmt::make_format_args(value)));
  }
  return request;
}

}  // namespace dlock::detail
