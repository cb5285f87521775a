#pragma once
// The Redis names dlock uses for a user key, as the lock service builds them:
// P{K}, P{K}:fence and P{K}:released for prefix P (lock.key_prefix).

#include <string>
#include <string_view>

#include "dlock/lock_options.hpp"

namespace dlock::cli {

struct LockNames {
  std::string lock;     // hash: owner token → hold count; the lease is its PTTL
  std::string fence;    // fencing counter
  std::string channel;  // published on each final release
};

LockNames lock_names(const LockConfig& config, std::string_view key);

}  // namespace dlock::cli
