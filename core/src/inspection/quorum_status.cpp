// A lock's read over a Redlock (`dlock status`, `list`, RedisLockService::status()): the nodes'
// replies made one by the owners a majority agree on, or by a refusal a majority gave alike.
#include "dlock/detail/quorum_status.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

#include "dlock/detail/quorum.hpp"
#include "dlock/detail/reply_integer.hpp"

namespace dlock::detail {

namespace {

using Owners = std::vector<std::string>;  // tokens, sorted

// A node's owners, in an order every node agrees on (HGETALL's order is the
// hash's own). Hold counts are left out: a re-entry or an inner release that
// reached only some nodes leaves them differing while the same owner holds.
std::optional<Owners> owners_of(const RedisReply& reply) {
  if (reply.is_error() || reply.elements.size() < 3) return std::nullopt;
  const RedisReply& hash = reply.elements[0];
  Owners owners;
  for (std::size_t i = 0; i + 1 < hash.elements.size(); i += 2) owners.push_back(hash.elements[i].str);
  std::sort(owners.begin(), owners.end());
  return owners;
}

// An error reply's code: "WRONGTYPE", "NOPERM", "BUSY", ...
std::string_view error_code(const RedisReply& reply) {
  const std::string_view text = reply.str;
  return text.substr(0, text.find(' '));
}

// One status reply of the replies of nodes that agree on the owners: the
// smallest of their PTTLs, each owner's largest hold count, and `fence`.
RedisReply merged(const std::vector<const RedisReply*>& agreeing, std::optional<long long> fence) {
  RedisReply agreed = *agreeing.front();
  for (const RedisReply* reply : agreeing) {
    agreed.elements[1].integer = std::min(agreed.elements[1].integer, reply->elements[1].integer);
  }
  agreed.elements[2] = fence ? RedisReply{RedisReply::Type::String, 0, std::to_string(*fence), {}} : RedisReply{};
  // The status script's line length, where read: the most any of them has (a waiter stands in line on every
  // node it reached).
  if (agreed.elements.size() > 3) {
    for (const RedisReply* reply : agreeing) {
      const auto waiters = reply->elements.size() > 3 ? integer_of(reply->elements[3]) : std::nullopt;
      if (waiters && (!integer_of(agreed.elements[3]) || *waiters > *integer_of(agreed.elements[3]))) {
        agreed.elements[3] = reply->elements[3];
      }
    }
  }
  RedisReply& hash = agreed.elements[0];
  for (std::size_t k = 0; k + 1 < hash.elements.size(); k += 2) {
    long long count = 0;
    for (const RedisReply* reply : agreeing) {
      const RedisReply& theirs = reply->elements[0];
      for (std::size_t m = 0; m + 1 < theirs.elements.size(); m += 2) {
        if (theirs.elements[m].str == hash.elements[k].str) {
          count = std::max(count, integer_of(theirs.elements[m + 1]).value_or(0));
        }
      }
    }
    hash.elements[k + 1].str = std::to_string(count);
  }
  return agreed;
}

}  // namespace

std::optional<RedisReply> agreed_status(const std::vector<std::optional<RedisReply>>& replies, std::size_t nodes) {
  std::vector<std::optional<Owners>> owners(replies.size());
  std::optional<long long> fence;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (replies[i]) owners[i] = owners_of(*replies[i]);
    if (!owners[i]) continue;
    if (const auto counter = integer_of(replies[i]->elements[2])) fence = std::max(fence.value_or(*counter), *counter);
  }
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (!owners[i]) continue;
    std::vector<const RedisReply*> agreeing;
    for (std::size_t j = 0; j < replies.size(); ++j) {
      if (owners[j] == owners[i]) agreeing.push_back(&*replies[j]);
    }
    if (agreeing.size() >= majority_of(nodes)) return merged(agreeing, fence);
  }
  // No majority on owners: a majority refusing alike is reported as that refusal.
  return agreed_refusal(replies, nodes);
}

std::optional<RedisReply> decided_status(const std::vector<std::optional<RedisReply>>& replies, bool quorum) {
  if (!quorum) return replies.front();
  return agreed_status(replies, replies.size());
}

std::string no_majority_agrees(const std::string& endpoint, std::size_t nodes, const std::string& lock_name) {
  return "redis " + endpoint + ": no majority of the Redlock's " + std::to_string(nodes) + " nodes agree on " +
         lock_name + " now (it is being taken or given back, or nodes are down or refusing); try again";
}

std::optional<RedisReply> agreed_refusal(const std::vector<std::optional<RedisReply>>& replies, std::size_t nodes) {
  for (const auto& reply : replies) {
    if (!reply || !reply->is_error()) continue;
    std::size_t alike = 0;
    for (const auto& other : replies) alike += other && other->is_error() && error_code(*other) == error_code(*reply);
    if (alike >= majority_of(nodes)) return *reply;
  }
  return std::nullopt;
}

}  // namespace dlock::detail
