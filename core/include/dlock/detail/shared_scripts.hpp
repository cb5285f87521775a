#pragma once
// The Lua scripts of the primitives beside the lock: semaphores and
// read-write locks (their text: core/scripts/primitives/*.lua). Built on first
// use, each a Script the ScriptRunner sends by EVALSHA like the lock's.
//
// Every hold of these primitives is a *record*: a hash {acquisition id →
// count} with the lease as its PTTL, the same shape as a lock's hash, so the
// lock's renew and renew_many scripts renew it, re-enter it and release an
// inner hold of it unchanged, and the watchdog serves it as a lock.
//
// Layout, for a name K and prefix P (each name shares the hash tag {K}):
//   semaphore   P{K}:semaphore            string: the permit count (no expiry: configuration)
//               P{K}:semaphore:holders    set of the holders' acquisition ids
//               P{K}:semaphore:holders:<id>  the record: {id → permits held}
//   read-write  P{K}:rw:write             the writer's record {id → hold count}
//               P{K}:rw:fence             the writers' fencing counter (as a lock's)
//               P{K}:rw:readers           set of the readers' acquisition ids
//               P{K}:rw:readers:<id>      a reader's record {id → hold count}
//   both        <base>:queue, <base>:alive   the line of waiters, as a lock's
//               <base>:released           channel: '' when holders left and someone waits
// A record whose key expired is a holder that died: the next acquire drops
// its id from the set.
//
// Replies: granted, the fencing token (a write lock's; 0 for readers and
// permits); not granted, -1 - nap (ms the caller may sleep before its next
// try); errors start DLOCK_WRONGTYPE, DLOCK_TOO_MANY <permits> (more permits
// asked than the semaphore has) or DLOCK_NO_PERMITS (no count set yet).

#include "dlock/scripts.hpp"

namespace dlock::detail {

// KEYS: count, holders, queue, alive. ARGV: id, permits asked, lease_ms,
// "wait_ms window_ms count_if_new" (count_if_new 0: the count must exist).
const Script& semaphore_acquire_script();
// KEYS: write, readers, queue, alive, fence. ARGV: id, lease_ms,
// "r|w wait_ms window_ms retention_ms", the caller's thread's id prefix
// ("<instance>:<thread>:": a read inside this thread's write is granted).
const Script& read_write_acquire_script();
// KEYS: record, queue[, set of holders]. ARGV: id, channel. → 1 released | 0 not this acquisition's.
const Script& record_release_script();
// KEYS: queue, alive. ARGV: the waiter's member, channel. → 1. Leaves a line after a wait ran out, and tells
// those still in it (they may have waited only behind the one leaving).
const Script& leave_shared_line_script();
// KEYS: count, queue. ARGV: permits, channel. → 1. Sets a semaphore's count, waking its waiters.
const Script& set_permits_script();
// KEYS: count, holders. → {count or -1 if none, permits held by live records}.
const Script& permits_in_use_script();

}  // namespace dlock::detail
