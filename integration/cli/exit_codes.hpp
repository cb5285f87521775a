#pragma once
// The exit statuses of the `dlock` command, from sysexits.h and the shell's
// conventions, named once so every subcommand means the same by them.

namespace dlock::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;       // e.g. `unlock --force` found the lock not held
inline constexpr int kExitUsage = 64;        // EX_USAGE: bad option or argument
inline constexpr int kExitUnavailable = 69;  // EX_UNAVAILABLE: Redis unreachable, refusing the login, or "not now"
inline constexpr int kExitSoftware = 70;     // EX_SOFTWARE: an error of dlock itself
inline constexpr int kExitOsError = 71;      // EX_OSERR: the system refused (fork, waitid, pipe)
// EX_PROTOCOL: Redis answered with an error (a name holding another type, a
// missing ACL right, a read-only replica). Not 1, which `run` returns when
// COMMAND exits 1 and `unlock` when nothing was held.
inline constexpr int kExitRedisError = 76;
inline constexpr int kExitTempFail = 75;     // EX_TEMPFAIL: lock not had within the wait
inline constexpr int kExitConfig = 78;       // EX_CONFIG: bad config file or DLOCK_REDIS_* variable
inline constexpr int kExitCannotExecute = 126;  // COMMAND exists but could not be executed
inline constexpr int kExitNotFound = 127;       // COMMAND not found
inline constexpr int kExitSignalBase = 128;     // COMMAND killed by signal N → 128 + N

}  // namespace dlock::cli
