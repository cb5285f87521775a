#pragma once
// A command in Redis' wire format (RESP: "*N\r\n" then "$len\r\npart\r\n" per
// part), written into a buffer the connection reuses. hiredis 0.14 formats
// the same bytes through a printf-like routine per part, which cost more
// instructions than the rest of a lock cycle's client work together.

#include <charconv>
#include <cstddef>
#include <span>
#include <string>

namespace dlock::detail {

inline void put_resp_header(std::string& out, char kind, std::size_t number) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, number);
  (void)ec;
  out.push_back(kind);
  out.append(digits, end);
  out.append("\r\n", 2);
}

// Appends the command made of `parts` (std::string or std::string_view) to
// `out`: several appended commands are a pipeline.
template <typename Part>
void append_resp_command(std::string& out, std::span<const Part> parts) {
  put_resp_header(out, '*', parts.size());
  for (const Part& part : parts) {
    put_resp_header(out, '$', part.size());
    out.append(part.data(), part.size());
    out.append("\r\n", 2);
  }
}

// Replaces `out` with the command made of `parts`.
template <typename Part>
void format_resp_command(std::string& out, std::span<const Part> parts) {
  out.clear();
  append_resp_command(out, parts);
}

}  // namespace dlock::detail
