#pragma once
// Durations on the command line: `250ms`, `10s`, `2m`, `1h`, or a plain
// number of milliseconds.

#include <string_view>

#include "dlock/lock_options.hpp"

namespace dlock::cli {

// Throws UsageError naming `option` for anything else (a negative number, a
// fraction, an unknown unit, or more than a year).
Millis parse_duration(std::string_view text, std::string_view option);

}  // namespace dlock::cli
