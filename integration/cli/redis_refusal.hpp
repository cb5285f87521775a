#pragma once
// Error replies from Redis, told to an operator: what Redis said and what to
// do about it. They all end the command with exit status 76 (EX_PROTOCOL:
// the server refused the exchange), never with 1, which means "COMMAND
// exited 1" for `run` and "not held" for `unlock`.

#include <string>

namespace dlock::cli {

// One line: `what` failed at `endpoint`, Redis' answer, and the advice its
// kind calls for (a read-only replica, a missing ACL right, a name holding
// data of another type).
std::string describe_refusal(const std::string& endpoint, const std::string& what, const std::string& answer);

// Throws RedisError with describe_refusal's message.
[[noreturn]] void throw_refusal(const std::string& endpoint, const std::string& what, const std::string& answer);

// The advice for an error message that came from the library (a RedisError
// of `run`), or "" if the message needs none.
std::string refusal_advice(const std::string& message);

}  // namespace dlock::cli
