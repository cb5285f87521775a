// glob_matches: Redis' glob rules (stringmatchlen in its util.c), byte by byte, with
// backtracking only at '*'.
#include "glob_match.hpp"

#include <utility>

namespace dlock::cli {

namespace {

// Whether byte `c` is in the set of a bracket expression starting at pattern[i] (just past
// '[' and any '^'); moves `i` to its closing ']' (or the end of an unterminated one).
bool in_set(std::string_view pattern, std::size_t& i, unsigned char c) {
  bool found = false;
  for (; i < pattern.size() && pattern[i] != ']'; ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      found = found || static_cast<unsigned char>(pattern[++i]) == c;
    } else if (i + 2 < pattern.size() && pattern[i + 1] == '-') {
      auto low = static_cast<unsigned char>(pattern[i]), high = static_cast<unsigned char>(pattern[i + 2]);
      if (low > high) std::swap(low, high);
      found = found || (c >= low && c <= high);
      i += 2;
    } else {
      found = found || static_cast<unsigned char>(pattern[i]) == c;
    }
  }
  return found;
}

}  // namespace

bool glob_matches(std::string_view pattern, std::string_view text) {
  std::size_t i = 0, j = 0;
  for (; i < pattern.size(); ++i) {
    switch (pattern[i]) {
      case '*': {
        while (i + 1 < pattern.size() && pattern[i + 1] == '*') ++i;
        if (i + 1 == pattern.size()) return true;
        for (std::size_t from = j; from <= text.size(); ++from) {
          if (glob_matches(pattern.substr(i + 1), text.substr(from))) return true;
        }
        return false;
      }
      case '?':
        if (j == text.size()) return false;
        ++j;
        break;
      case '[': {
        if (j == text.size()) return false;
        const bool negated = i + 1 < pattern.size() && pattern[i + 1] == '^';
        i += negated ? 2 : 1;
        if (in_set(pattern, i, static_cast<unsigned char>(text[j])) == negated) return false;
        ++j;
        break;
      }
      case '\\':
        if (i + 1 < pattern.size()) ++i;
        [[fallthrough]];
      default:
        if (j == text.size() || pattern[i] != text[j]) return false;
        ++j;
    }
  }
  return j == text.size();
}

}  // namespace dlock::cli
