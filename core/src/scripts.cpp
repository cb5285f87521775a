#include "dlock/scripts.hpp"

#include "dlock/errors.hpp"

namespace dlock::detail {

// Redis does not roll back a script that fails midway, so each script checks
// everything that can fail before its first write.
const Script kAcquireScript{"acquire", R"lua(
local lock_type = redis.call('TYPE', KEYS[1]).ok
if lock_type ~= 'none' and lock_type ~= 'hash' then
  return redis.error_reply('DLOCK_WRONGTYPE ' .. KEYS[1] .. ' is a ' .. lock_type)
end
local lease = tonumber(ARGV[2])
-- Free: take it, count the first hold and draw the next fencing token.
if lock_type == 'none' then
  local fence_type = redis.call('TYPE', KEYS[2]).ok
  if fence_type ~= 'none' and fence_type ~= 'string' then
    return redis.error_reply('DLOCK_WRONGTYPE ' .. KEYS[2] .. ' is a ' .. fence_type)
  end
  if fence_type == 'string' then
    local fence = redis.call('GET', KEYS[2])
    if not string.match(fence, '^%d+$') or string.len(fence) > 18 then
      return redis.error_reply('DLOCK_WRONGTYPE ' .. KEYS[2] .. ' is not a fencing counter')
    end
  end
  local token = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], lease)
  return {1, 1, token}
end
-- Held by this owner: re-entry. Count the hold; the lease only ever grows.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local holds = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  if redis.call('PTTL', KEYS[1]) < lease then
    redis.call('PEXPIRE', KEYS[1], lease)
  end
  return {1, holds, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
-- Held by another owner: say how long it may stay held at most.
return {0, redis.call('PTTL', KEYS[1])}
)lua"};

const Script kReleaseScript{"release", R"lua(
local lock_type = redis.call('TYPE', KEYS[1]).ok
if lock_type ~= 'none' and lock_type ~= 'hash' then
  return redis.error_reply('DLOCK_WRONGTYPE ' .. KEYS[1] .. ' is a ' .. lock_type)
end
-- Not this owner's (expired, taken over, never held): change nothing.
if lock_type == 'none' or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
-- An inner hold: one fewer, the outer holder keeps the lock.
local holds = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
if holds > 0 then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return holds
end
-- The outermost hold: free the lock and wake a waiter.
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], 'released')
return 0
)lua"};

const Script kRenewScript{"renew", R"lua(
-- Still this owner's: extend (never shorten: a re-entry may have granted a
-- longer fixed lease). Anything else (gone, taken over, overwritten by a key
-- of another type) means the holder has lost it.
if redis.call('TYPE', KEYS[1]).ok == 'hash' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return 1
end
return 0
)lua"};

void ScriptRunner::load_all() {
  for (const Script* script : {&kAcquireScript, &kReleaseScript, &kRenewScript}) load(*script);
}

std::string ScriptRunner::load(const Script& script) {
  RedisReply reply = redis_.command({"SCRIPT", "LOAD", std::string(script.source)});
  if (reply.type != RedisReply::Type::String) {
    throw RedisError("redis " + redis_.endpoint() + ": cannot load the " + std::string(script.name) +
                     " script: " + (reply.is_error() ? reply.str : std::string("unexpected reply")) +
                     "; the user needs the EVALSHA and SCRIPT commands");
  }
  std::lock_guard lock(mutex_);
  for (auto& [known, sha] : shas_) {
    if (known == &script) {
      sha = reply.str;
      return sha;
    }
  }
  shas_.emplace_back(&script, reply.str);
  return reply.str;
}

std::string ScriptRunner::sha_of(const Script& script) {
  {
    std::lock_guard lock(mutex_);
    for (const auto& [known, sha] : shas_)
      if (known == &script) return sha;
  }
  return load(script);
}

RedisCommand ScriptRunner::evalsha(const std::string& sha, const std::vector<std::string>& keys,
                                   const std::vector<std::string>& args) {
  RedisCommand cmd;
  cmd.reserve(3 + keys.size() + args.size());
  cmd.emplace_back("EVALSHA");
  cmd.push_back(sha);
  cmd.push_back(std::to_string(keys.size()));
  cmd.insert(cmd.end(), keys.begin(), keys.end());
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

bool ScriptRunner::is_noscript(const RedisReply& reply) {
  return reply.is_error() && reply.str.rfind("NOSCRIPT", 0) == 0;
}

RedisReply ScriptRunner::run(const Script& script, const std::vector<std::string>& keys,
                             const std::vector<std::string>& args) {
  RedisReply reply = redis_.command(evalsha(sha_of(script), keys, args));
  if (is_noscript(reply)) reply = redis_.command(evalsha(load(script), keys, args));
  return reply;
}

std::vector<RedisReply> ScriptRunner::run_pipelined(
    const Script& script, const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>& calls) {
  std::string sha = sha_of(script);
  std::vector<RedisCommand> commands;
  commands.reserve(calls.size());
  for (const auto& [keys, args] : calls) commands.push_back(evalsha(sha, keys, args));
  std::vector<RedisReply> replies = redis_.pipeline(commands);

  std::vector<RedisCommand> retries;
  std::vector<std::size_t> retried_at;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (is_noscript(replies[i])) retried_at.push_back(i);
  }
  if (retried_at.empty()) return replies;
  sha = load(script);
  for (std::size_t i : retried_at) retries.push_back(evalsha(sha, calls[i].first, calls[i].second));
  std::vector<RedisReply> retried = redis_.pipeline(retries);
  for (std::size_t j = 0; j < retried_at.size() && j < retried.size(); ++j) replies[retried_at[j]] = std::move(retried[j]);
  return replies;
}

}  // namespace dlock::detail
