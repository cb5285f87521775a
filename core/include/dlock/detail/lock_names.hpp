#pragma once
// The Redis names of one lock — P{K} and its fence, channel, queue, alive and
// turn — built in one allocation: lock() and unlock() need them on every call.

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace dlock::detail {

class LockNames {
 public:
  // The braces are a Cluster hash tag: every name of a lock shares one slot.
  LockNames(std::string_view prefix, std::string_view key) : lock_size_(prefix.size() + key.size() + 2) {
    std::size_t size = 0;
    for (std::string_view suffix : kSuffixes) size += lock_size_ + suffix.size();
    buffer_.resize(size);
    char* out = buffer_.data();
    for (std::string_view suffix : kSuffixes) {
      out = put(put(put(put(put(out, prefix), "{"), key), "}"), suffix);
    }
  }

  std::string_view lock() const { return {buffer_.data(), lock_size_}; }
  std::string_view fence() const { return name(0); }
  std::string_view channel() const { return name(1); }
  std::string_view queue() const { return name(2); }
  std::string_view turn() const { return name(3); }
  std::string_view alive() const { return name(4); }

  // The keys every script that touches the line takes, in this order: lock,
  // fence, queue, alive, turn. The channel is no key: the scripts name it
  // themselves (lock .. ':released'), since every name a script is given
  // costs the server as much as one of its calls.
  std::array<std::string_view, 5> script_keys() const { return {lock(), fence(), queue(), alive(), turn()}; }

 private:
  static constexpr std::array<std::string_view, 5> kSuffixes{":fence", ":released", ":queue", ":turn", ":alive"};

  static char* put(char* out, std::string_view part) { return std::copy(part.begin(), part.end(), out); }

  // Name i is the lock's name with suffix i, after names 0..i-1 in the buffer.
  std::string_view name(std::size_t i) const {
    std::size_t start = 0;
    for (std::size_t j = 0; j < i; ++j) start += lock_size_ + kSuffixes[j].size();
    return {buffer_.data() + start, lock_size_ + kSuffixes[i].size()};
  }

  std::string buffer_;  // P{K}:fence P{K}:released P{K}:queue P{K}:turn P{K}:alive, back to back
  std::size_t lock_size_;
};

}  // namespace dlock::detail
