#pragma once
// The rows of `dlock list`: one per lock (its first owner), one per writer
// or reader of a read-write lock, one per holder of a semaphore's permits.
// Over a Redlock a lock is listed where a majority of the nodes hold it (the
// rule of `dlock status`, quorum_status.hpp), and as unknown where no
// majority agrees.

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dlock/detail/loaded_script.hpp"
#include "dlock/config.hpp"
#include "dlock/detail/holder_directory.hpp"

namespace dlock::cli {

struct ListRow {
  std::string key;
  std::string kind;       // "lock", "write", "read", "semaphore"
  std::string lock_name;  // P{K}, P{K}:rw or P{K}:semaphore
  std::optional<LockHolder> holder;  // hold_count: re-entry depth, or permits held; none: unknown (see error)
  std::optional<long long> lease_ms, waiters, fencing_token;
  std::optional<long long> permits;  // a semaphore's count
  std::string error;                 // a lock no majority of a Redlock's nodes agree on
};

// The locks named `names` (P{K}), a batch per round trip (HGETALL, PTTL, ZCARD of the line, GET of the
// fencing counter; on a Redlock on every node at once), in name order; leaves out those no longer held.
// Throws RedisError for a lock Redis refused to read.
std::vector<ListRow> lock_rows(RedisExecutor& redis, detail::HolderDirectory& holders, const std::string& prefix,
                               const std::set<std::string>& names);

// The writers and readers of the read-write locks, and the holders of the semaphores, of `keys`, each key
// read by the shared status script (dlock/detail/shared_reading.hpp) in one atomic step. Throws RedisError
// for a refused read.
std::vector<ListRow> shared_rows(detail::LoadedScript& script, detail::HolderDirectory& holders,
                                 const std::string& endpoint, const LockConfig& config,
                                 const std::set<std::string>& keys);

}  // namespace dlock::cli
