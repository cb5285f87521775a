#pragma once
// `dlock status` over a Redlock (redis.mode: redlock): every node answers for
// itself, and a lock is held only where a majority of the nodes hold it. The
// nodes' answers differ in their PTTLs even when they agree, so "the reply
// most nodes gave" would show a lock granted on 3 of 5 nodes as free (the
// two that missed it answer alike); the owners are compared instead.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "cli_script.hpp"
#include "dlock/redis_executor.hpp"

namespace dlock::cli {

// A read script run where a lock lives: on one Redis, or on each node of a Redlock.
class LockReadScript {
 public:
  // Loads `source` (see CliScript). On a Redlock a node that cannot be
  // reached is skipped; a majority must load it.
  LockReadScript(RedisExecutor& redis, const std::string& source, const std::string& purpose);

  bool quorum() const { return quorum_; }
  std::size_t nodes() const { return scripts_.size(); }

  // One reply per node (one in all off a Redlock). On a Redlock, nothing for a
  // node that could not be reached; elsewhere a ConnectionError is thrown.
  std::vector<std::optional<RedisReply>> run(const std::vector<std::string>& keys);

 private:
  bool quorum_ = false;
  std::vector<std::optional<CliScript>> scripts_;
};

// The status script's replies ({HGETALL lock, PTTL lock, GET fence}) of the
// Redlock's `nodes`, as one: the owners a majority of nodes agree on (each
// with the largest hold count among them), the smallest of their PTTLs, the
// largest fencing counter any node answered. Else an error a majority gave
// alike (by its code: WRONGTYPE, NOPERM, BUSY, ...). Nothing if no majority
// agrees (a lock being taken or given back, or too many nodes down).
std::optional<RedisReply> agreed_status(const std::vector<std::optional<RedisReply>>& replies, std::size_t nodes);

}  // namespace dlock::cli
