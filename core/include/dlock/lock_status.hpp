#pragma once
// What Redis holds for a key right now, as `dlock status` shows it
// (docs/cli.md), and what a forced release removed, as `dlock unlock --force`
// tells it: the answers of RedisLockService::status(), read_write_status(),
// semaphore_status() and the force_* calls. A status is a snapshot: the lock
// may change hands the moment after it was read, so it suits operators,
// dashboards and tests, never a decision to touch a guarded resource (hold
// the lock for that, and check its fencing token).

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace dlock {

// The service behind a holder, from the entry every RedisLockService keeps in
// Redis about itself (detail/instance_registry.hpp).
struct HolderService {
  std::string host;
  long long pid = 0;
  long long started_unix_ms = 0;  // when that service started, wall clock
};

// One holder, as an operator reads it.
struct LockHolder {
  std::string owner;         // its acquisition id, "<instance>:<owner>:<n>" (the field in the lock's hash)
  long long hold_count = 0;  // re-entry depth; a semaphore's holder: the permits it holds
  // None when its service has no entry: it stopped or crashed (the entry
  // outlives it by at most three lease periods), or Redis refused its write.
  std::optional<HolderService> service;
  std::optional<long long> since_unix_ms;  // when its lock() call began; needs `service`
  // A read-write lock's or a semaphore's holder: its own record's lease (none
  // without expiry). A lock's holders share the lock's: LockStatus::lease_left.
  std::optional<std::chrono::milliseconds> lease_left;
};

// A lock (lock(), try_lock(), lock_all()).
struct LockStatus {
  std::string lock_name;            // where it was looked for in Redis: P{key}, P being lock.key_prefix
  std::vector<LockHolder> holders;  // none when free; one, but for a lock broken by hand and retaken
  std::optional<std::chrono::milliseconds> lease_left;  // none when free or without expiry
  // The last one granted; none if never locked (or the counter expired). Over a Redlock the largest of the
  // nodes' counters, which can exceed the holder's own token: nodes that granted after its majority drew later.
  std::optional<long long> fencing_token;
  std::optional<long long> waiters;        // acquisitions in line for it; none if Redis would not say

  bool held() const { return !holders.empty(); }
};

// A read-write lock (read_lock(), write_lock()).
struct ReadWriteLockStatus {
  std::optional<LockHolder> writer;
  std::vector<LockHolder> readers;
  std::optional<long long> waiters;        // in its line; none if Redis would not say
  std::optional<long long> fencing_token;  // the last writer's; none if never write-locked

  bool held() const { return writer || !readers.empty(); }
};

// A semaphore (semaphore()).
struct SemaphoreStatus {
  std::optional<long long> permits;  // its count; none if it has none
  long long in_use = 0;              // permits held, the holders' counts summed
  std::vector<LockHolder> holders;   // hold_count: the permits each holds
  std::optional<long long> waiters;  // in its line; none if Redis would not say

  bool exists() const { return permits || !holders.empty(); }
};

// An owner a forced unlock removed from a lock.
struct RemovedOwner {
  std::string owner;         // its acquisition id
  long long hold_count = 0;  // the largest any node held
  std::size_t nodes = 0;     // how many nodes removed it (1 off a Redlock)
};

// What force_unlock() did. Over a Redlock each node answers for itself (one
// restarted empty removes nothing, another holds a different hold count), so
// it is told owner by owner: an owner a majority of the nodes held was the
// lock's holder.
struct ForcedUnlock {
  std::vector<RemovedOwner> owners;  // every owner any node removed
  std::size_t nodes = 1;             // nodes asked (1 off a Redlock)
  std::size_t answered = 0;          // nodes that said what they removed

  bool quorum() const { return nodes > 1; }
  // Whether `owner` may have held the lock: a majority of the nodes removed
  // it, or would have, counting the nodes that did not answer.
  bool may_have_held(const RemovedOwner& owner) const;
  // Whether a majority of the nodes removed `owner`: it held the lock.
  bool held_on_majority(const RemovedOwner& owner) const;
  bool majority_answered() const;
  // Whether it removed the lock's holder: some owner may_have_held().
  bool removed_holder() const;
};

// A holder a forced release removed from a read-write lock or a semaphore.
struct RemovedHolder {
  std::string owner;    // its acquisition id
  long long count = 0;  // re-entry depth, or permits held
  bool writer = false;  // a read-write lock's writer (else a reader, or a semaphore's holder)
};

}  // namespace dlock
