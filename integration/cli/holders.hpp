#pragma once
// Who holds a lock, as the dlock command prints it: a holder the library
// read (dlock/detail/holder_directory.hpp) as a line of text or JSON fields.

#include <string>

#include "dlock/lock_status.hpp"

namespace dlock::cli {

// "pid 4242 on web-3 since 2024-05-01T12:00:01.234Z (for 42s)", or what is known.
std::string holder_text(const LockHolder& holder, long long now_unix_ms);

// ,"host":…,"pid":…,"since":…,"service_started":… (null where unknown), to append to an object.
std::string holder_json_fields(const LockHolder& holder);

// 2024-05-01T12:00:01.234Z
std::string utc_timestamp(long long unix_ms);

long long now_unix_ms();

}  // namespace dlock::cli
