#pragma once
// `dlock unlock --force KEY`: the operator's escape hatch.

#include <span>

namespace dlock::cli {

extern const char* const kUnlockUsage;

// Deletes the lock whoever holds it, wakes its waiters, and logs at warn the
// owner token(s) removed. Returns 0 when a lock was removed, 1 when KEY was
// not held. Throws UsageError (also without --force), ConfigError,
// ConnectionError and RedisError (refused: exit 76) for main to report.
int unlock_command(std::span<char* const> args);

}  // namespace dlock::cli
