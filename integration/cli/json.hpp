#pragma once
// Just enough JSON for `dlock status --json`.

#include <string>
#include <string_view>

namespace dlock::cli {

// `text` as a quoted JSON string. Valid UTF-8 passes through; quotes,
// backslashes and control characters are escaped; a byte that is not part of
// valid UTF-8 (keys and tokens are binary-safe in Redis) becomes \u00XX, its
// Latin-1 reading, so the output is always valid JSON.
std::string json_string(std::string_view text);

}  // namespace dlock::cli
