#pragma once
// What a Redis Cluster says about its layout: the slot map (CLUSTER SLOTS)
// and the redirections of a command (MOVED, ASK), read from their replies.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// Slots first..last (inclusive) are served by `master`; `replicas` copy it.
struct SlotRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  NodeAddress master;
  std::vector<NodeAddress> replicas;
};

// The ranges of a CLUSTER SLOTS reply; nullopt if it is not one. A node
// announced with an empty host ("" or "?") lives on `asked_host`, the host of
// the node that answered. Ranges out of 0..16383 or with port 0 are skipped.
std::optional<std::vector<SlotRange>> parse_cluster_slots(const RedisReply& reply, const std::string& asked_host);

// "MOVED 3999 127.0.0.1:6381" or "ASK 3999 127.0.0.1:6381".
struct Redirect {
  enum class Kind { moved, ask };
  Kind kind = Kind::moved;
  std::uint16_t slot = 0;
  NodeAddress to;
};

// The redirection `reply` asks for, if it is one; an empty host means the
// answering node's (`answering_host`).
std::optional<Redirect> redirect_of(const RedisReply& reply, const std::string& answering_host);

}  // namespace dlock::detail
