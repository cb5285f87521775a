#pragma once
// `dlock status KEY... [--json]`: what Redis says about each lock.

#include <span>

namespace dlock::cli {

extern const char* const kStatusUsage;

// Reads each lock with plain commands (HGETALL, PTTL, GET; nothing written)
// and prints one line per key, or one JSON array. Returns 0, or 1 if some
// name held something that is not a dlock lock. Throws UsageError,
// ConfigError and ConnectionError for main to report.
int status_command(std::span<char* const> args);

}  // namespace dlock::cli
