#pragma once
// How the lock's code reads its scripts' replies: the tests and the fencing
// token reader shared by the acquire loop, re-entry, release and fencing.

#include <charconv>
#include <cstdint>
#include <optional>
#include <system_error>

#include "dlock/redis_executor.hpp"
#include "dlock/scripts.hpp"

namespace dlock::detail {

inline bool is_integer(const RedisReply& reply, long long value) {
  return reply.type == RedisReply::Type::Integer && reply.integer == value;
}

// Whether a renew script's reply (a re-entry, an inner release) says the hold is still this acquisition's.
inline bool is_hold_kept(const RedisReply& reply) { return reply.type == RedisReply::Type::Integer && reply.integer == 1; }

// With lock.replica_acks, a reply standing for writes too few replicas acknowledged.
inline bool is_unacknowledged(const RedisReply& reply) {
  return reply.is_error() && reply.str.starts_with(kNotAcknowledgedError);
}

// A fencing token as the scripts send it: an integer, or text past 2^53.
inline std::optional<std::uint64_t> token_of(const RedisReply& reply) {
  if (reply.type == RedisReply::Type::Integer && reply.integer >= 0) return static_cast<std::uint64_t>(reply.integer);
  if (reply.type != RedisReply::Type::String || reply.str.empty()) return std::nullopt;
  std::uint64_t token = 0;
  const auto [end, ec] = std::from_chars(reply.str.data(), reply.str.data() + reply.str.size(), token);
  if (ec != std::errc() || end != reply.str.data() + reply.str.size()) return std::nullopt;
  return token;
}

}  // namespace dlock::detail
