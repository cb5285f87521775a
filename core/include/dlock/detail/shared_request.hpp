#pragma once
// What a semaphore's or a read-write lock's acquisition asks for (shared_acquire.cpp).

#include <string_view>

namespace dlock::detail {

enum class SharedKind { read, write, permits };

// The most permits a semaphore may have: 15 digits, exact in the scripts' Lua numbers.
inline constexpr long long kMaxPermits = 999'999'999'999'999;

struct SharedRequest {
  SharedKind kind;
  std::string_view key;       // the read-write lock's key, or the semaphore's name
  long long permits = 1;      // permits asked (a semaphore)
  long long count_if_new = 0; // a semaphore's count if it has none yet; 0: it must have one
};

}  // namespace dlock::detail
