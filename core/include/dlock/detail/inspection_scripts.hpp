#pragma once
// The read-only scripts an inspection runs, and the forced release of a
// read-write lock's or semaphore's holders (core/scripts/inspection/*.lua,
// a comment per branch there). The lock's own forced release is a lock
// script (scripts.hpp: kForceReleaseScript). Reply shapes:
//   lock_status(lock, fence, queue) → {HGETALL lock, PTTL lock, GET fence, ZCARD queue or its refusal}
//   shared_status(seven names, see shared_reading.cpp) → each part, or its refusal in its place
//   force_release_records(set, queue[, writer]; owner or '', channel) → {id, count, 'writer' | 'holder', ...}

#include "dlock/scripts.hpp"

namespace dlock::detail {

extern const Script kLockStatusScript;
extern const Script kSharedStatusScript;
extern const Script kForceReleaseRecordsScript;

}  // namespace dlock::detail
