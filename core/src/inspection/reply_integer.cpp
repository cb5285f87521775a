// integer_of: a reply's integer, from an integer reply or a bulk string of digits only.
#include "dlock/detail/reply_integer.hpp"

#include <charconv>

namespace dlock::detail {

std::optional<long long> integer_of(const RedisReply& reply) {
  if (reply.type == RedisReply::Type::Integer) return reply.integer;
  if (reply.type != RedisReply::Type::String) return std::nullopt;
  long long value = 0;
  const auto [end, error] = std::from_chars(reply.str.data(), reply.str.data() + reply.str.size(), value);
  if (error != std::errc() || end != reply.str.data() + reply.str.size()) return std::nullopt;
  return value;
}

}  // namespace dlock::detail
