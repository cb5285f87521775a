#pragma once
// `dlock list [PATTERN] [--json]`: the locks held under the config's prefix.

#include <span>

namespace dlock::cli {

extern const char* const kListUsage;

// Finds the lock hashes with SCAN (never KEYS), reads each with plain
// commands and prints a table or one JSON array. Returns 0 (also when
// nothing is held: it then says which prefix and server it searched).
// Throws UsageError, ConfigError, ConnectionError and RedisError for main.
int list_command(std::span<char* const> args);

}  // namespace dlock::cli
