#pragma once
// A write Redis refused, traced to a read-only replica: the library may word
// such a refusal as a key of another type, so the dlock command asks ROLE.

#include <string>

#include "dlock/config.hpp"

namespace dlock::cli {

// Called while a RedisError from the library is being handled: if the server
// at `config` (a Redlock: any of its nodes) is a replica (ROLE), throws a
// RedisError naming it and saying that `what` failed because it is
// read-only; otherwise rethrows the current exception.
// (The library may word a write refused by a replica as a key of another type.)
[[noreturn]] void rethrow_if_replica(const RedisConfig& config, const std::string& what);

}  // namespace dlock::cli
