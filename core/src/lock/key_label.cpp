// Keys as messages and logs show them: bytes that are not printable escaped as \xNN,
// at most 200 shown, and the "lock 'KEY'" labels built on that.
#include "dlock/detail/key_label.hpp"

namespace dlock::detail {

std::string printable(std::string_view key) {
  constexpr std::size_t kShown = 200;
  std::string out;
  for (std::size_t i = 0; i < key.size() && i < kShown; ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  if (key.size() > kShown) out += "...";
  return out;
}

std::string lock_label(std::string_view key) { return labelled("lock", key); }

std::string labelled(std::string_view noun, std::string_view key) {
  return std::string(noun) + " '" + printable(key) + "'";
}

}  // namespace dlock::detail
