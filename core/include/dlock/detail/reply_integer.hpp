#pragma once
// A reply's integer, as the inspection reads hold counts, leases, permit
// counts and fencing counters: an integer reply, or a bulk string of digits.

#include <optional>

#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// Nothing for nil, an error, or a string that is not wholly an integer.
std::optional<long long> integer_of(const RedisReply& reply);

}  // namespace dlock::detail
