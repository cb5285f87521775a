#pragma once
// Replies by which Redis says "not now" rather than "no": it is loading its
// dataset after a restart (LOADING), running a long script (BUSY), a replica
// whose link to its master is down (MASTERDOWN), or a cluster that is
// resharding or failing over (TRYAGAIN, CLUSTERDOWN). A lock() waits these
// out within its wait, as it waits out an outage.

#include <array>
#include <string_view>

#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// What to tell a person who met one of these states.
inline constexpr std::string_view kTransientStateAdvice =
    "Redis cannot serve this now (loading its data after a restart, running a long script, a replica cut off "
    "from its master, or a cluster resharding or failing over); try again shortly";

// The state's name if `error_text` (an error reply's text) is such a state, else empty.
inline std::string_view transient_state(std::string_view error_text) {
  static constexpr std::array<std::string_view, 5> kStates{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"};
  for (std::string_view state : kStates) {
    if (error_text.starts_with(state) && (error_text.size() == state.size() || error_text[state.size()] == ' ')) {
      return state;
    }
  }
  return {};
}

// The state's name if `reply` is such an error, else empty.
inline std::string_view transient_state(const RedisReply& reply) {
  return reply.is_error() ? transient_state(std::string_view(reply.str)) : std::string_view();
}

}  // namespace dlock::detail
