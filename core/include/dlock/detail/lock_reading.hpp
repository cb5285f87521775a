#pragma once
// A lock's status read as `dlock status` and RedisLockService::status() read
// it: in one atomic step (inspection_scripts.hpp: lock_status), as a
// majority agrees over a Redlock, its holders named from the registry.
// A read Redis refused comes back as that refusal, never as a free lock: the
// command shows such a key as unknown and goes on, the service throws it.

#include <string>
#include <string_view>

#include "dlock/detail/holder_directory.hpp"
#include "dlock/detail/node_script.hpp"
#include "dlock/detail/redis_refusal.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/lock_status.hpp"

namespace dlock::detail {

struct LockReading {
  LockStatus status;
  Refusal refusal;  // set: held or free is unknown
};

// `script` runs kLockStatusScript.
LockReading read_lock_status(NodeScript& script, HolderDirectory& holders, const std::string& endpoint,
                             const LockConfig& config, std::string_view key);

}  // namespace dlock::detail
