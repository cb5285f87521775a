#pragma once
// What a semaphore's or a read-write lock's acquisition asks for (shared_acquire.cpp).

#include <string_view>

namespace dlock::detail {

enum class SharedKind { read, write, permits };

struct SharedRequest {
  SharedKind kind;
  std::string_view key;       // the read-write lock's key, or the semaphore's name
  long long permits = 1;      // permits asked (a semaphore)
  long long count_if_new = 0; // a semaphore's count if it has none yet; 0: it must have one
};

}  // namespace dlock::detail
