#pragma once
// `dlock status KEY... [--json]`: what Redis says about each lock.

#include <span>

namespace dlock::cli {

extern const char* const kStatusUsage;

// Reads each lock in one atomic step (a read-only script: HGETALL, PTTL, GET)
// and prints one line per key, or one JSON array. Returns 0, or 76 if Redis
// refused some read (that key shows as unknown, never as free). Throws
// UsageError, ConfigError, ConnectionError and RedisError for main to report.
int status_command(std::span<char* const> args);

}  // namespace dlock::cli
