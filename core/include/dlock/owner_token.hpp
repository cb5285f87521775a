#pragma once
// Owner identity. A token is "<instance>:<thread>": 128 random bits drawn once
// per RedisLockService, and a random id drawn once per thread. Both come from
// the OS CSPRNG (getrandom), never from time, pid or a counter, so no other
// client can guess a token and release or extend a lock it does not hold.

#include <string>

namespace dlock::detail {

// 32 hex digits of fresh CSPRNG output. Throws dlock::Error if the OS refuses.
std::string random_instance_id();

// This thread's id: drawn on first use, then the same for the thread's life.
const std::string& current_thread_id();

}  // namespace dlock::detail
