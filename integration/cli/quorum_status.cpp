#include "quorum_status.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

#include "dlock/detail/quorum.hpp"
#include "dlock/errors.hpp"

namespace dlock::cli {

namespace {

using Owners = std::vector<std::pair<std::string, std::string>>;  // token → hold count, sorted

// A node's owners, in an order every node agrees on (HGETALL's order is the hash's own).
std::optional<Owners> owners_of(const RedisReply& reply) {
  if (reply.is_error() || reply.elements.size() != 3) return std::nullopt;
  const RedisReply& hash = reply.elements[0];
  Owners owners;
  for (std::size_t i = 0; i + 1 < hash.elements.size(); i += 2) {
    owners.emplace_back(hash.elements[i].str, hash.elements[i + 1].str);
  }
  std::sort(owners.begin(), owners.end());
  return owners;
}

std::optional<long long> counter_of(const RedisReply& fence) {
  if (fence.is_nil()) return std::nullopt;
  long long value = 0;
  const auto [end, error] = std::from_chars(fence.str.data(), fence.str.data() + fence.str.size(), value);
  if (error != std::errc() || end != fence.str.data() + fence.str.size()) return std::nullopt;
  return value;
}

}  // namespace

LockReadScript::LockReadScript(RedisExecutor& redis, const std::string& source, const std::string& purpose) {
  const std::vector<RedisExecutor*> nodes = redis.quorum_nodes();
  quorum_ = !nodes.empty();
  if (!quorum_) {
    scripts_.emplace_back(std::in_place, redis, source, purpose);
    return;
  }
  std::size_t loaded = 0;
  std::string last_failure;
  for (RedisExecutor* node : nodes) {
    try {
      scripts_.emplace_back(std::in_place, *node, source, purpose);
      ++loaded;
    } catch (const ConnectionError& e) {
      scripts_.emplace_back(std::nullopt);
      last_failure = e.what();
    }
  }
  if (loaded < detail::majority_of(nodes.size())) {
    throw ConnectionError("redlock: only " + std::to_string(loaded) + " of " + std::to_string(nodes.size()) +
                          " nodes could be reached to " + purpose + " (last: " + last_failure + ")");
  }
}

std::vector<std::optional<RedisReply>> LockReadScript::run(const std::vector<std::string>& keys) {
  std::vector<std::optional<RedisReply>> replies;
  for (auto& script : scripts_) {
    if (!script) {
      replies.emplace_back();
      continue;
    }
    try {
      replies.emplace_back(script->run(keys));
    } catch (const ConnectionError&) {
      if (!quorum_) throw;
      replies.emplace_back();
    }
  }
  return replies;
}

std::optional<RedisReply> agreed_status(const std::vector<std::optional<RedisReply>>& replies, std::size_t nodes) {
  std::optional<long long> fence;
  for (const auto& reply : replies) {
    if (!reply || !owners_of(*reply)) continue;
    if (const auto counter = counter_of(reply->elements[2])) fence = std::max(fence.value_or(*counter), *counter);
  }
  for (std::size_t i = 0; i < replies.size(); ++i) {
    const std::optional<Owners> owners = replies[i] ? owners_of(*replies[i]) : std::nullopt;
    if (!owners) continue;
    std::size_t agreeing = 0;
    long long pttl = 0;
    for (const auto& other : replies) {
      if (!other || owners_of(*other) != owners) continue;
      const long long other_pttl = other->elements[1].integer;
      pttl = agreeing == 0 ? other_pttl : std::min(pttl, other_pttl);
      ++agreeing;
    }
    if (agreeing < detail::majority_of(nodes)) continue;
    RedisReply agreed = *replies[i];
    agreed.elements[1].integer = pttl;
    agreed.elements[2] = fence ? RedisReply{RedisReply::Type::String, 0, std::to_string(*fence), {}} : RedisReply{};
    return agreed;
  }
  return std::nullopt;
}

}  // namespace dlock::cli
