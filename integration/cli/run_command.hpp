#pragma once
// `dlock run KEY [options] -- COMMAND [ARGS...]`: flock(1) across hosts.

#include <span>

namespace dlock::cli {

extern const char* const kRunUsage;

// Takes the lock, runs COMMAND while holding it, releases it when COMMAND
// ends, and returns COMMAND's status. Throws UsageError, ConfigError and
// ConnectionError for main to report; returns 75 when the lock was busy for
// the whole wait, 126/127 when COMMAND cannot be started.
int run_command(std::span<char* const> args);

}  // namespace dlock::cli
