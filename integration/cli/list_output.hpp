#pragma once
// `dlock list`'s rows printed: one JSON array, or a table and a line saying
// how many of each kind are held.

#include <string>
#include <vector>

#include "list_rows.hpp"

namespace dlock::cli {

// [{key, kind, owner, hold_count, host, pid, since, service_started, lease_ms, waiters, fencing_token,
// permits, lock_name[, error]}, ...], one object a line; null where there is no value.
std::string list_json(const std::vector<ListRow>& rows);

// KEY KIND HELD BY HOLDS LEASE LEFT WAITERS FENCING TOKEN, aligned; then a line per unknown row saying why.
std::string list_table(const std::vector<ListRow>& rows, long long now_ms);

// "1 lock, 2 read-write locks and 1 semaphore" (each key once), or "" if no row is known held.
std::string held_summary(const std::vector<ListRow>& rows);

}  // namespace dlock::cli
