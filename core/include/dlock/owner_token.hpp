#pragma once
// Owner identity. A token is "<instance>:<owner>": 128 random bits drawn once
// per RedisLockService, and an owner's 64 (owner.hpp): a thread's drawn once
// per thread, a task's by Owner::create(). Both come from
// the OS CSPRNG (getrandom), never from time, pid or a counter, so no other
// client can guess a token and release or extend a lock it does not hold.

#include <cstdint>
#include <string>

namespace dlock::detail {

// 32 hex digits of fresh CSPRNG output. Throws dlock::Error if the OS refuses.
std::string random_instance_id();

// This thread's owner as 16 hex digits: drawn on first use, then the same for the thread's life.
const std::string& current_thread_id();

// An owner's 64 bits as 16 hex digits (leading zeros kept).
std::string owner_hex(std::uint64_t value);

}  // namespace dlock::detail
