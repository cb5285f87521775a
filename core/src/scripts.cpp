#include "dlock/scripts.hpp"

#include "dlock/detail/small_buffer.hpp"
#include "dlock/errors.hpp"

#include <algorithm>
#include <charconv>

#include <string>

namespace dlock::detail {

// Redis does not roll back a script that fails midway, so each script checks
// everything that can fail before its first write. The prelude holds what
// several scripts share.
namespace {

const std::string kPrelude = R"lua(
local function wrong_type(key, wanted)
  local actual = redis.call('TYPE', key).ok
  if actual ~= 'none' and actual ~= wanted then
    return 'DLOCK_WRONGTYPE ' .. key .. ' is a ' .. actual
  end
  return nil
end
-- Draws the next fencing token from `key`, before the caller's first write.
-- Returns nil, leaving `key` untouched, if it holds no count: another type
-- (GET's error, caught), text that is no non-negative number, or one INCR
-- refuses (leading zeros, 2^63-1). The token travels as a string: Lua numbers
-- are exact only to 2^53.
local function draw_fence(key)
  local fence = redis.pcall('GET', key)
  if type(fence) == 'table' or (fence and not string.match(fence, '^%d+$')) then return nil end
  if type(redis.pcall('INCR', key)) == 'table' then return nil end
  return redis.call('GET', key)
end
-- Hands the next turn to the oldest waiter in line (other than `skip`): for a
-- window only it may take the free lock. Publishes its token (empty: nobody
-- waits, anyone may). The publish goes first: it is the step a user's channel
-- rights may refuse, and a refusal must leave nothing half done.
local function hand_turn(queue, turn, channel, window, skip)
  local line = redis.call('ZRANGE', queue, 0, 1)
  local next_owner = line[1] or ''
  if next_owner == skip then next_owner = line[2] or '' end
  redis.call('PUBLISH', channel, next_owner)
  if next_owner ~= '' then
    redis.call('ZREM', queue, next_owner)
    redis.call('SET', turn, next_owner, 'PX', window)
  end
  return next_owner
end
)lua";

}  // namespace

// KEYS: lock, fence, queue, turn. ARGV: owner, lease_ms, wait_ms (0: try once, stay out of line),
// holds the caller knows of (0: it believes it holds none).
const Script kAcquireScript{"acquire", kPrelude + R"lua(
local bad = wrong_type(KEYS[1], 'hash') or wrong_type(KEYS[2], 'string') or wrong_type(KEYS[3], 'zset')
  or wrong_type(KEYS[4], 'string')
if bad then return redis.error_reply(bad) end
local owner, lease, wait = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
-- A waiter joins the line once and keeps its place until it gets the lock or leaves.
local function wait_in_line()
  if wait > 0 then
    if not redis.call('ZSCORE', KEYS[3], owner) then
      -- Arrival in microseconds, built as text: a Lua number would print it rounded.
      local now = redis.call('TIME')
      redis.call('ZADD', KEYS[3], now[1] .. string.format('%06d', tonumber(now[2])), owner)
    end
    if redis.call('PTTL', KEYS[3]) < wait + 60000 then redis.call('PEXPIRE', KEYS[3], wait + 60000) end
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  -- Held by this owner: re-entry. Count the hold; the lease only ever grows.
  if redis.call('HEXISTS', KEYS[1], owner) == 1 then
    local holds
    if ARGV[4] == '0' then
      -- The caller knows of no hold: the one here is left by an acquire whose
      -- reply was lost (a timeout). Adopt it as the first hold, not a second.
      redis.call('HSET', KEYS[1], owner, 1)
      holds = 1
    else
      holds = redis.call('HINCRBY', KEYS[1], owner, 1)
    end
    if redis.call('PTTL', KEYS[1]) < lease then redis.call('PEXPIRE', KEYS[1], lease) end
    return {1, holds, redis.call('GET', KEYS[2]) or '0'}
  end
  -- Held by another owner: wait in line, at most as long as its lease.
  wait_in_line()
  return {0, redis.call('PTTL', KEYS[1])}
end
-- Free, but it is another waiter's turn: keep out until it claims or its window ends.
local turn = redis.call('GET', KEYS[4])
if turn and turn ~= owner then
  wait_in_line()
  return {0, redis.call('PTTL', KEYS[4])}
end
-- Free: take it, count the first hold and draw the next fencing token.
local token = draw_fence(KEYS[2])
if not token then
  return redis.error_reply('DLOCK_WRONGTYPE ' .. KEYS[2] .. ' is not a fencing counter')
end
redis.call('HSET', KEYS[1], owner, 1)
redis.call('PEXPIRE', KEYS[1], lease)
if turn then redis.call('DEL', KEYS[4]) end
redis.call('ZREM', KEYS[3], owner)
return {1, 1, token}
)lua"};

// KEYS: lock, channel, queue, turn[, fence]. ARGV: owner, lease_ms, window_ms[, candidate, candidate_lease_ms,
// may_bypass]. The candidate is a waiter of the releasing process, known to be alive and asleep in line: a final
// release grants it the lock outright, sparing it the round trip of its own acquire, if it is the oldest waiter
// or if may_bypass is '1' (the lock has not yet stayed in the releaser's process too many holds in a row).
const Script kReleaseScript{"release", kPrelude + R"lua(
local bad = wrong_type(KEYS[1], 'hash') or wrong_type(KEYS[3], 'zset') or wrong_type(KEYS[4], 'string')
if bad then return redis.error_reply(bad) end
-- Not this owner's (expired, taken over, never held): change nothing.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return {-1, 0, ''}
end
-- An inner hold: one fewer, the outer holder keeps the lock.
if tonumber(redis.call('HGET', KEYS[1], ARGV[1])) > 1 then
  local holds = redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return {1, holds, ''}
end
-- The outermost hold, with a live local waiter to take it: hand the lock straight over.
local candidate = ARGV[4] or ''
if candidate ~= '' and KEYS[5] and redis.call('ZSCORE', KEYS[3], candidate) then
  local oldest = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if oldest == candidate or ARGV[6] == '1' then
    -- A fencing counter that holds no count leaves the plain hand-off below
    -- to run (and the next acquire to report it).
    local token = draw_fence(KEYS[5])
    if token then
      redis.call('DEL', KEYS[1])
      redis.call('HSET', KEYS[1], candidate, 1)
      redis.call('PEXPIRE', KEYS[1], ARGV[5])
      redis.call('ZREM', KEYS[3], candidate)
      return {0, 0, candidate, token}
    end
  end
end
-- The outermost hold: give the next waiter its turn and free the lock.
local next_owner = hand_turn(KEYS[3], KEYS[4], KEYS[2], ARGV[3])
redis.call('DEL', KEYS[1])
return {0, 0, next_owner, ''}
)lua"};

// KEYS: queue, turn, channel[, lock]. ARGV: owner, window_ms. A waiter that gives up.
const Script kLeaveScript{"leave", kPrelude + R"lua(
local bad = wrong_type(KEYS[1], 'zset') or wrong_type(KEYS[2], 'string') or (KEYS[4] and wrong_type(KEYS[4], 'hash'))
if bad then return redis.error_reply(bad) end
-- A release handed this waiter the lock but its reply was lost, so the waiter
-- never learnt of it: free it now rather than let it idle out its lease.
if KEYS[4] and redis.call('HGET', KEYS[4], ARGV[1]) == '1' then
  hand_turn(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[1])
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('DEL', KEYS[4])
  return 1
end
-- It was this waiter's turn: pass it on rather than let the lock idle through the window.
if redis.call('GET', KEYS[2]) == ARGV[1] then
  if hand_turn(KEYS[1], KEYS[2], KEYS[3], ARGV[2]) == '' then redis.call('DEL', KEYS[2]) end
end
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
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
  for (const Script* script : {&kAcquireScript, &kReleaseScript, &kRenewScript, &kLeaveScript}) load(*script);
}

std::string_view ScriptRunner::load(const Script& script) {
  RedisReply reply = redis_.command({"SCRIPT", "LOAD", std::string(script.source)});
  if (reply.type != RedisReply::Type::String) {
    throw RedisError("redis " + redis_.endpoint() + ": cannot load the " + std::string(script.name) +
                     " script: " + (reply.is_error() ? reply.str : std::string("unexpected reply")) +
                     "; the user needs the EVALSHA and SCRIPT commands");
  }
  // A script's SHA is the SHA1 of its text, the same after every reload, so
  // the first one stored stays: callers may keep views of it.
  std::lock_guard lock(mutex_);
  return shas_.try_emplace(&script, std::move(reply.str)).first->second;
}

std::string_view ScriptRunner::sha_of(const Script& script) {
  {
    std::lock_guard lock(mutex_);
    auto it = shas_.find(&script);
    if (it != shas_.end()) return it->second;
  }
  return load(script);
}

RedisCommand ScriptRunner::evalsha(std::string_view sha, const std::vector<std::string>& keys,
                                   const std::vector<std::string>& args) {
  RedisCommand cmd;
  cmd.reserve(3 + keys.size() + args.size());
  cmd.emplace_back("EVALSHA");
  cmd.emplace_back(sha);
  cmd.push_back(std::to_string(keys.size()));
  cmd.insert(cmd.end(), keys.begin(), keys.end());
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

bool ScriptRunner::is_noscript(const RedisReply& reply) {
  return reply.is_error() && reply.str.rfind("NOSCRIPT", 0) == 0;
}

RedisReply ScriptRunner::run(const Script& script, std::span<const std::string_view> keys,
                             std::span<const std::string_view> args) {
  // Views of the caller's strings, sent without a copy (lock() and unlock() run this on every call).
  SmallBuffer<std::string_view, 16> buffer(3 + keys.size() + args.size());
  const std::span<std::string_view> parts = buffer.span();
  char key_count[24];
  const auto [end, ec] = std::to_chars(std::begin(key_count), std::end(key_count), keys.size());
  (void)ec;
  parts[0] = "EVALSHA";
  parts[2] = std::string_view(key_count, static_cast<std::size_t>(end - key_count));
  std::copy(keys.begin(), keys.end(), parts.begin() + 3);
  std::copy(args.begin(), args.end(), parts.begin() + 3 + static_cast<std::ptrdiff_t>(keys.size()));

  parts[1] = sha_of(script);
  RedisReply reply = redis_.command_parts(parts);
  if (is_noscript(reply)) {
    parts[1] = load(script);
    reply = redis_.command_parts(parts);
  }
  return reply;
}

std::vector<RedisReply> ScriptRunner::run_pipelined(
    const Script& script, const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>& calls) {
  std::string sha(sha_of(script));
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
