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

// The state's name if `reply` is such an error, else empty.
inline std::string_view transient_state(const RedisReply& reply) {
  static constexpr std::array<std::string_view, 5> kStates{"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"};
  if (!reply.is_error()) return {};
  for (std::string_view state : kStates) {
    if (reply.str.starts_with(state) &&
        (reply.str.size() == state.size() || reply.str[state.size()] == ' ')) {
      return state;
    }
  }
  return {};
}

}  // namespace dlock::detail
