#pragma once
// What the cluster executor's files share: a node's connection borrowed, what
// a reply says (a passing state, NOSCRIPT, a script's SHA), and the unit a pipeline is routed in.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_topology.hpp"
#include "cluster/hash_slot.hpp"
#include "dlock/cluster_executor.hpp"
#include "dlock/connection_pool.hpp"
#include "dlock/errors.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock {

// Commands that go to one node together: a keyed command and the keyless
// ones after it (a WAIT goes where the write before it went).
struct ClusterExecutor::Unit {
  detail::CommandRoute route;
  std::vector<std::size_t> at;  // the commands' places in the pipeline
  std::size_t keyed = 0;        // which of them is the keyed one (keyless ones may come first)
};

namespace detail {

// A node could not be connected to: nothing was sent, so trying again is safe.
struct Unreachable {
  std::string why;
};

inline ConnectionPool::Lease borrow(ClusterTopology::Node& node) {
  try {
    return node.pool.borrow();
  } catch (const ConnectionError& e) {
    throw Unreachable{e.what()};
  }
}

// "TRYAGAIN" or "CLUSTERDOWN" when `reply` says so: a state that passes.
inline std::string_view cluster_state(const RedisReply& reply) {
  if (!reply.is_error()) return {};
  for (const std::string_view state : {std::string_view("TRYAGAIN"), std::string_view("CLUSTERDOWN")}) {
    if (reply.str.starts_with(state) && (reply.str.size() == state.size() || reply.str[state.size()] == ' ')) {
      return state;
    }
  }
  return {};
}

inline bool is_noscript(const RedisReply& reply) { return reply.is_error() && reply.str.starts_with("NOSCRIPT"); }

// The SHA an EVALSHA names, else empty.
template <typename Part>
std::string_view sha_of(std::span<const Part> argv) {
  if (argv.size() < 2 || argv[0].size() != 7) return {};
  const std::string_view name = argv[0];
  return name == "EVALSHA" || name == "evalsha" ? std::string_view(argv[1]) : std::string_view();
}

inline bool reply_is_sha(const RedisReply& reply) {
  return reply.type == RedisReply::Type::String && reply.str.size() == 40;
}

}  // namespace detail

// The names the cluster executor's files use unqualified (this header is theirs alone).
using detail::borrow;
using detail::ClusterTopology;
using detail::cluster_state;
using detail::CommandKind;
using detail::CommandRoute;
using detail::is_noscript;
using detail::reply_is_sha;
using detail::sha_of;
using detail::Unreachable;
using Node = ClusterTopology::Node;

}  // namespace dlock
