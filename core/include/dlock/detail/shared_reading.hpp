#pragma once
// A key's read-write lock and semaphore, as `dlock status` and
// RedisLockService::read_write_status() / semaphore_status() read them: who
// writes, who reads, how many permits are held of how many and by whom, in
// one atomic step (inspection_scripts.hpp: shared_status). Each part is read,
// or refused, on its own: a right the user lacks for one part leaves the
// other readable.

#include <string>
#include <string_view>

#include "dlock/detail/holder_directory.hpp"
#include "dlock/detail/loaded_script.hpp"
#include "dlock/detail/redis_refusal.hpp"
#include "dlock/lock_options.hpp"
#include "dlock/lock_status.hpp"

namespace dlock::detail {

struct ReadWriteReading {
  ReadWriteLockStatus status;
  Refusal refusal;  // set: the rest is unknown
};

struct SemaphoreReading {
  SemaphoreStatus status;
  Refusal refusal;  // set: the rest is unknown
};

struct SharedReading {
  ReadWriteReading read_write;
  SemaphoreReading semaphore;
};

// `script` runs kSharedStatusScript. Not over a Redlock, which has neither.
SharedReading read_shared_status(LoadedScript& script, HolderDirectory& holders, const std::string& endpoint,
                                 const LockConfig& config, std::string_view key);

}  // namespace dlock::detail
