#pragma once
// A key's read-write lock and semaphore beside its lock, as `dlock status`
// prints them (the library reads them: dlock/detail/shared_reading.hpp):
// who writes, who reads, how many permits are held of how many, and by whom.

#include <string>

#include "dlock/detail/shared_reading.hpp"

namespace dlock::cli {

// Lines to print after the lock's own ("KEY (read-write): ...", "KEY (semaphore): ..."), none for a part that
// does not exist.
std::string shared_status_text(const std::string& key, const detail::SharedReading& status, long long now_ms);

// ,"read_write":{...}|{"error":...}|null,"semaphore":{...}|{"error":...}|null, to append to the key's JSON object.
std::string shared_status_json(const detail::SharedReading& status);

}  // namespace dlock::cli
