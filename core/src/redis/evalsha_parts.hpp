#pragma once
// One EVALSHA call's parts as views of the caller's strings, sent without a
// copy (lock() and unlock() build one on every call). The object must stay
// where it was made: a part points into it.

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <span>
#include <string_view>

#include "dlock/detail/small_buffer.hpp"

namespace dlock::detail {

class EvalshaParts {
 public:
  EvalshaParts(std::string_view sha, std::span<const std::string_view> keys, std::span<const std::string_view> args)
      : buffer_(3 + keys.size() + args.size()) {
    const std::span<std::string_view> parts = buffer_.span();
    const auto [end, ec] = std::to_chars(std::begin(key_count_), std::end(key_count_), keys.size());
    (void)ec;
    parts[0] = "EVALSHA";
    parts[1] = sha;
    parts[2] = std::string_view(key_count_, static_cast<std::size_t>(end - key_count_));
    std::copy(keys.begin(), keys.end(), parts.begin() + 3);
    std::copy(args.begin(), args.end(), parts.begin() + 3 + static_cast<std::ptrdiff_t>(keys.size()));
  }
  EvalshaParts(const EvalshaParts&) = delete;
  EvalshaParts& operator=(const EvalshaParts&) = delete;

  void set_sha(std::string_view sha) { buffer_.span()[1] = sha; }
  std::span<const std::string_view> span() { return buffer_.span(); }

 private:
  SmallBuffer<std::string_view, 16> buffer_;
  char key_count_[24];
};

}  // namespace dlock::detail
