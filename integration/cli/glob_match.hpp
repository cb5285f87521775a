#pragma once
// A Redis glob matched in the dlock command itself, as SCAN's MATCH reads
// it. `dlock list` scans with a MATCH that covers each lock's every name,
// P{PATTERN}*, and keeps a name only if its KEY matches PATTERN itself: a
// key holding '}' could otherwise pass for another key's name.

#include <string_view>

namespace dlock::cli {

// Whether `text` matches `pattern`: * any run of bytes, ? any one byte,
// [abc], [^abc] and [a-z] one byte of (or not of) a set, \x the byte x.
bool glob_matches(std::string_view pattern, std::string_view text);

}  // namespace dlock::cli
