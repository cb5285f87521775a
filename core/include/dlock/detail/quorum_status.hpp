#pragma once
// A lock's read over a Redlock (redis.mode: redlock), for `dlock status`,
// `dlock list` and RedisLockService::status(): every node answers for itself,
// and a lock is held only where a majority of the nodes hold it. The nodes'
// answers differ in their PTTLs even when they agree, so "the reply
// most nodes gave" would show a lock granted on 3 of 5 nodes as free (the
// two that missed it answer alike); the owners are compared instead.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "dlock/redis_executor.hpp"

namespace dlock::detail {

// The status script's replies ({HGETALL lock, PTTL lock, GET fence[, ZCARD
// line]}) of the Redlock's `nodes`, as one: the owners a majority of nodes
// agree on (each with the largest hold count among them), the smallest of
// their PTTLs, the largest fencing counter any node answered, the longest
// line among them. Else an error a majority gave
// alike (by its code: WRONGTYPE, NOPERM, BUSY, ...). Nothing if no majority
// agrees (a lock being taken or given back, or too many nodes down).
std::optional<RedisReply> agreed_status(const std::vector<std::optional<RedisReply>>& replies, std::size_t nodes);

// The status as dlock decides it from each node's reply (NodeScript::run):
// off a Redlock (`quorum` false) the one reply, on one agreed_status.
std::optional<RedisReply> decided_status(const std::vector<std::optional<RedisReply>>& replies, bool quorum);

// What is said of a lock no majority of the Redlock's `nodes` agree on (exit 69: try again).
std::string no_majority_agrees(const std::string& endpoint, std::size_t nodes, const std::string& lock_name);

// An error reply a majority of `nodes` gave alike (by its code), if any: a
// refusal to report as such (WRONGTYPE, NOPERM: exit 76) rather than as "no
// majority agrees, try again".
std::optional<RedisReply> agreed_refusal(const std::vector<std::optional<RedisReply>>& replies, std::size_t nodes);

}  // namespace dlock::detail
