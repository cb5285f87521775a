#pragma once
// Error replies from Redis to the inspection reads and forced releases, told
// to an operator: what Redis said and what to do about it. The library throws
// them (RedisError, or ConnectionError for a "not now"); the dlock command
// ends with exit status 76 (EX_PROTOCOL: the server refused the exchange), or
// 69 (EX_UNAVAILABLE) when Redis said "not now".

#include <string>

#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// Whether `answer` says "not now" (LOADING, BUSY, MASTERDOWN, TRYAGAIN,
// CLUSTERDOWN) rather than "no": the command ends with exit status 69
// (unavailable, try again) instead of 76.
bool refused_for_now(const std::string& answer);

// One line: `what` failed at `endpoint`, Redis' answer, and the advice its
// kind calls for (a read-only replica, a missing ACL right, a name holding
// data of another type).
std::string describe_refusal(const std::string& endpoint, const std::string& what, const std::string& answer);

// Throws RedisError with describe_refusal's message (ConnectionError if the
// answer is a "not now").
[[noreturn]] void throw_refusal(const std::string& endpoint, const std::string& what, const std::string& answer);

// A read Redis refused (or answered in a shape dlock does not know): what it
// read is unknown, neither held nor free.
struct Refusal {
  std::string error;     // the message (describe_refusal's); empty: no refusal
  bool for_now = false;  // Redis said "not now" (LOADING, TRYAGAIN, ...): exit 69, not 76

  explicit operator bool() const { return !error.empty(); }
};

// The refusal of `what` at `endpoint` that `reply` is: an error reply, or a
// reply of another shape than the caller expects ("an unexpected reply").
Refusal refusal_of(const std::string& endpoint, const std::string& what, const RedisReply& reply);

// Throws what throw_refusal throws for `refusal` (already described).
[[noreturn]] void throw_refusal(const Refusal& refusal);

// The advice for an error message that came from the library (a RedisError
// of `run`), or "" if the message needs none.
std::string refusal_advice(const std::string& message);

}  // namespace dlock::detail
