#include "dlock/scripts.hpp"

#include "dlock/detail/held_lock.hpp"
#include "dlock/detail/in_parallel.hpp"
#include "dlock/detail/quorum.hpp"

#include "dlock/detail/small_buffer.hpp"
#include "dlock/detail/transient_state.hpp"
#include "dlock/errors.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

#include <poll.h>
#include <random>

#include <string>

namespace dlock::detail {

// Redis does not roll back a script that fails midway, so each script checks
// everything that can fail before its first write. The prelude holds what
// several scripts share.
//
// Every script that touches the line takes the same five keys (LockNames::
// script_keys): lock, fence, queue, alive, turn; the channel's name is the
// lock's with ':released' (a channel is no key). The line is two
// sorted sets: `queue` orders waiters by arrival (µs, server clock), `alive`
// holds the time (ms) until which each is presumed alive; a waiter renews it
// on every try, at least every third of the turn window. A waiter not heard
// from for a whole window is dropped by whichever script next looks at the
// head of the line: a dead waiter costs the others at most one window, and a
// live one never loses its place. While the lock is free, it belongs to the
// oldest live waiter (the head); `turn` remembers, for a third of a window,
// that the head was told so, so that it is not told again on every try.
namespace {

const std::string kPrelude = R"lua(
local function wrong_type(key, wanted)
  local actual = redis.call('TYPE', key).ok
  if actual ~= 'none' and actual ~= wanted then
    return 'DLOCK_WRONGTYPE ' .. key .. ' is a ' .. actual
  end
  return nil
end
-- A read that checks its key's type on the way, in place of a TYPE call per
-- key: its reply, or nil and an error reply naming the key and what it holds
-- (any other refusal, an ACL's say, as Redis worded it). Run before a
-- script's first write, as every check.
local function read(key, command, ...)
  local reply = redis.pcall(command, key, ...)
  if type(reply) == 'table' and reply.err then
    if not string.find(reply.err, 'WRONGTYPE', 1, true) then return nil, reply end
    return nil, redis.error_reply('DLOCK_WRONGTYPE ' .. key .. ' is a ' .. redis.call('TYPE', key).ok)
  end
  return reply
end
-- The server's clock, read once per script, in ms.
local clock_ms, clock_s, clock_us
local function now()
  if not clock_ms then
    local t = redis.call('TIME')
    clock_s, clock_us = t[1], t[2]
    clock_ms = tonumber(clock_s) * 1000 + math.floor(tonumber(clock_us) / 1000)
  end
  return clock_ms
end
-- The same clock in µs, as exact text (past 2^53 a Lua number is not exact).
local function now_us_text()
  now()
  return clock_s .. string.rep('0', 6 - #clock_us) .. clock_us
end
-- Settles the fencing token just drawn from `key` by `INCR` (under pcall:
-- `n` is its reply), before the caller's first write. A counter that is new,
-- or that expired (`retention` ms after its seeding: INCR keeps the expiry),
-- is seeded from the server's clock in µs, so tokens keep growing over a
-- key's whole life while the clock does not go back and a key is granted less
-- than once per µs on average. Returns nil, leaving `key` as it was, if it
-- holds no count: another type, text that is no number, a negative number, or
-- one INCR refuses (leading zeros, 2^63-1). A token past 2^53 travels as
-- text: Lua numbers are exact only to 2^53.
local function settle_fence(key, retention, n)
  if type(n) == 'table' then
    -- Anything but a refusal of the value (a read-only replica, an ACL) is Redis' own answer.
    local err = n.err or ''
    if string.find(err, 'WRONGTYPE', 1, true) or string.find(err, 'not an integer', 1, true)
      or string.find(err, 'overflow', 1, true) then return nil end
    return nil, redis.error_reply(err)
  end
  if n == 1 then
    local seed = now_us_text()
    redis.call('SET', key, seed, 'PX', retention)
    return seed
  end
  if n <= 0 then
    redis.call('DECR', key)
    return nil
  end
  if n < 9007199254740992 then return n end
  return redis.call('GET', key)
end
local function draw_fence(key, retention)
  return settle_fence(key, retention, redis.pcall('INCR', key))
end
-- `alive` also holds, under the empty member, when a waiter was last heard
-- from (`heard`, read by the caller). If nobody was for a whole window, the
-- server rather than its waiters stood still (a freeze, a long script, a
-- restart), and their deadlines passed unseen: every waiter gets one more
-- window instead of being dropped. Runs once, first, in every script that
-- looks at the line.
local function forgive_stillness(alive, window, heard)
  heard = tonumber(heard)
  if heard and now() - heard > window then
    for _, member in ipairs(redis.call('ZRANGE', alive, 0, -1)) do
      redis.call('ZADD', alive, now() + window, member)
    end
    redis.call('ZADD', alive, now(), '')
  end
end
-- The oldest waiter still presumed alive, and until when; drops the dead
-- ahead of it. `first` is the head of the line as the caller read it.
local function live_head(queue, alive, first)
  for _ = 1, 32 do
    if not first then return nil end
    local until_ms = tonumber(redis.call('ZSCORE', alive, first))
    if until_ms and until_ms > now() then return first, until_ms end
    redis.call('ZREM', queue, first)
    redis.call('ZREM', alive, first)
    first = redis.call('ZRANGE', queue, 0, 0)[1]
  end
  -- A long run of dead waiters: the next script goes on pruning.
  return first, now()
end
-- Tells `head` that the free lock is its to take, unless it was told within
-- the last third of a window (`told`: the turn as the caller read it). The
-- publish goes first: it is the step a user's channel rights may refuse, and
-- a refusal must leave nothing half done.
local function hand_turn(turn, channel, head, window, told)
  if told == head then return end
  redis.call('PUBLISH', channel, head)
  redis.call('SET', turn, head, 'PX', math.max(1, math.floor(window / 3)))
end
-- Joins the line once, by arrival (`place`: the caller's arrival as the
-- caller read it, nil when not in line), and renews the caller's presence in it.
-- `arrival` (µs, text), when the caller gives it, stands for the server's
-- clock: a Redlock's nodes must order their lines alike, and the caller's one
-- stamp, sent to all, does that where each node's own clock and the order
-- requests reach it would not.
local function stay_in_line(queue, alive, id, window, place, arrival)
  if not place then redis.call('ZADD', queue, arrival or now_us_text(), id) end
  redis.call('ZADD', alive, now() + window, id, now(), '')
  local keep = 2 * window
  redis.call('PEXPIRE', queue, keep)
  redis.call('PEXPIRE', alive, keep)
end
-- Takes `id` out of the line. `others`, when the caller knows: whether
-- anyone else is in it (true), or nobody (false).
local function leave_line(queue, alive, id, others)
  if others == false then
    redis.call('DEL', queue, alive)
    return
  end
  redis.call('ZREM', queue, id)
  redis.call('ZREM', alive, id)
  if others == nil and redis.call('EXISTS', queue) == 0 then redis.call('DEL', alive) end
end
local function line_types_bad(lock, queue, alive, turn)
  return wrong_type(lock, 'hash') or wrong_type(queue, 'zset') or wrong_type(alive, 'zset') or wrong_type(turn, 'string')
end
local function not_a_counter(fence)
  return redis.error_reply('DLOCK_WRONGTYPE ' .. fence .. ' is not a fencing counter')
end
)lua";

}  // namespace

const std::string& script_prelude() { return kPrelude; }

// KEYS: lock, fence, queue, alive, turn. ARGV: acquisition id, lease_ms, "wait_ms window_ms retention_ms[ arrival_us]"
// (wait 0: try once, stay out of line; window: the turn window; retention: the fencing counter's; arrival: the
// caller's place in line, Redlock only, else the server's clock at its first try). A first acquisition
// only: re-entry renews with a hold count. The settings the fast path does not need travel as one argument: each
// argument costs the server as much as one call of the script.
// Replies are scalars, never tables (Redis converts a table reply field by field, which cost the server as much as
// the rest of the fast path): granted, the fencing token (an integer > 0, or text past 2^53); not granted, the
// integer -1 - nap, where nap is how long (ms) the caller may sleep before its next try, -1 if the holder set no
// lease.
const Script kAcquireScript{"acquire", R"lua(
local lock, fence, queue, alive, turn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id, lease = ARGV[1], ARGV[2]
-- Free, and nobody in line: the common case, in as few calls as it takes and
-- before the prelude's helpers are defined (defining them costs the server as
-- much as a call). A counter that is new or holds no plain count goes on to
-- be settled below.
local drawn
if redis.call('EXISTS', lock, queue) == 0 then
  drawn = redis.pcall('INCR', fence)
  if type(drawn) == 'number' and drawn > 1 and drawn < 9007199254740992 then
    redis.call('HSET', lock, id, 1)
    redis.call('PEXPIRE', lock, lease)
    return drawn
  end
end
)lua" + kPrelude + R"lua(
local channel = lock .. ':released'
local wait, window, retention, arrival = string.match(ARGV[3], '^(%d+) (%d+) (%d+) ?(%d*)$')
wait, window = tonumber(wait), tonumber(window)
if arrival == '' then arrival = nil end
if drawn ~= nil then
  local token, refused = settle_fence(fence, retention, drawn)
  if not token then return refused or not_a_counter(fence) end
  redis.call('HSET', lock, id, 1)
  redis.call('PEXPIRE', lock, lease)
  return token
end
-- Each read checks its key's type before the first write; the turn is read
-- only when the lock is free (a turn of another type stops the release that
-- would hand it, and the next free try, with the same error).
local mine, bad = read(lock, 'HEXISTS', id)
if bad then return bad end
local heard, place, told
heard, bad = read(alive, 'ZSCORE', '')
if bad then return bad end
place, bad = read(queue, 'ZSCORE', id)
if bad then return bad end
local left = redis.call('PTTL', lock)
if left == -2 then
  told, bad = read(turn, 'GET')
  if bad then return bad end
end
forgive_stillness(alive, window, heard)
if left ~= -2 then
  -- Granted to this very acquisition already, by a try whose reply was lost or
  -- by a release that handed it over: adopt that grant. Its token was never
  -- handed to anyone, and may be gone with its counter: draw a new one. The
  -- hold is this caller's alone, so its lease is exactly the caller's.
  if mine == 1 then
    local token, refused = draw_fence(fence, retention)
    if not token then return refused or not_a_counter(fence) end
    redis.call('HSET', lock, id, 1)
    redis.call('PEXPIRE', lock, lease)
    if place then leave_line(queue, alive, id) end
    return token
  end
  -- Held by another: wait in line, no longer than its lease.
  if wait > 0 then stay_in_line(queue, alive, id, window, place, arrival) end
  return -1 - left
end
-- Free, with a line: it is the oldest live waiter's, however it became free
-- (released, expired, its holder crashed). Anyone else tells that waiter so.
-- A waiter renews its own place first, so that it is never taken for dead.
if wait > 0 then stay_in_line(queue, alive, id, window, place, arrival) end
local head, head_until = live_head(queue, alive, redis.call('ZRANGE', queue, 0, 0)[1])
if head and head ~= id then
  hand_turn(turn, channel, head, window, told)
  return -1 - (head_until - now() + 1)
end
-- Free, and this caller's turn (or everyone in line was dead): take it.
local token, refused = draw_fence(fence, retention)
if not token then return refused or not_a_counter(fence) end
redis.call('HSET', lock, id, 1)
redis.call('PEXPIRE', lock, lease)
if head then
  leave_line(queue, alive, id)
  if told then redis.call('DEL', turn) end
end
return token
)lua"};

// KEYS: lock, fence, queue, alive, turn. ARGV: acquisition id, "window_ms retention_ms"[, "candidate
// candidate_lease_ms may_bypass"]. The final release of an acquisition (inner releases renew with a hold count).
// The candidate is a waiter of the releasing process, known to be alive and asleep in line: the release grants it
// the lock outright, sparing it the round trip of its own acquire, if it is the head of the line or if may_bypass
// is '1' (the lock has not yet stayed in the releaser's process too many times in a row).
// Replies: 0, not this acquisition's (nothing changed); text, released, naming the waiter told of its turn ('' if
// none); a one-element array {token}, handed over to the candidate with that fencing token.
const Script kReleaseScript{"release", R"lua(
local lock, fence, queue, alive, turn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
local held = redis.pcall('HEXISTS', lock, id)
-- Not this acquisition's (expired, taken over, never held): change nothing.
if held == 0 then return 0 end
-- Nobody waits: free it, and tell nobody; before the prelude, as acquire's fast path.
if held == 1 and redis.call('EXISTS', queue) == 0 then
  redis.call('DEL', lock)
  return ''
end
if type(held) ~= 'number' then
  if not string.find(held.err or '', 'WRONGTYPE', 1, true) then return held end
  return redis.error_reply('DLOCK_WRONGTYPE ' .. lock .. ' is not a hash')
end
)lua" + kPrelude + R"lua(
local channel = lock .. ':released'
local window, retention = string.match(ARGV[2], '^(%d+) (%d+)$')
window = tonumber(window)
local candidate, candidate_lease, may_bypass = string.match(ARGV[3] or '', '^(%S+) (%d+) ([01])$')
-- Each read checks its key's type before the first write (the lock's was by HEXISTS).
local heard, first, bad
heard, bad = read(alive, 'ZSCORE', '')
if bad then return bad end
first, bad = read(queue, 'ZRANGE', 0, 1)
if bad then return bad end
-- The candidate at the head of the line is alive (its process knows it is
-- asleep there): nobody is dropped, so there is nothing to forgive either.
local head = first[1]
if candidate ~= head then
  forgive_stillness(alive, window, heard)
  head = live_head(queue, alive, head)
end
if candidate and (candidate == head or (may_bypass == '1' and redis.call('ZSCORE', queue, candidate))) then
  -- A fencing counter that holds no count leaves the plain hand-off below
  -- to run (and the next acquire to report it).
  local token = draw_fence(fence, retention)
  if token then
    redis.call('DEL', lock)
    redis.call('HSET', lock, candidate, 1)
    redis.call('PEXPIRE', lock, candidate_lease)
    if candidate == first[1] then
      leave_line(queue, alive, candidate, first[2] ~= nil)
    else
      leave_line(queue, alive, candidate)
    end
    return {token}
  end
end
-- Give the oldest live waiter its turn, and free the lock. Only waiters were
-- dropped so far, which the next script would drop all the same: a turn of
-- another type still refuses before anything that matters is done.
if head then
  local told
  told, bad = read(turn, 'GET')
  if bad then return bad end
  hand_turn(turn, channel, head, window, told)
end
redis.call('DEL', lock)
return head or ''
)lua"};

// KEYS: lock, fence, queue, alive, turn. ARGV: acquisition id, window_ms. A waiter that gives up.
const Script kLeaveScript{"leave", kPrelude + R"lua(
local lock, fence, queue, alive, turn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local channel = lock .. ':released'
local id, window = ARGV[1], tonumber(ARGV[2])
local bad = line_types_bad(lock, queue, alive, turn)
if bad then return redis.error_reply(bad) end
forgive_stillness(alive, window, redis.call('ZSCORE', alive, ''))
leave_line(queue, alive, id)
-- Granted to it by a try or a release whose reply it never got: free it
-- rather than let it idle out its lease.
if redis.call('HEXISTS', lock, id) == 1 then redis.call('DEL', lock) end
-- A free lock goes to the next live waiter at once, not at its next try.
if redis.call('EXISTS', lock) == 0 then
  local head = live_head(queue, alive, redis.call('ZRANGE', queue, 0, 0)[1])
  if head then hand_turn(turn, channel, head, window, redis.call('GET', turn)) end
end
return 1
)lua"};

// KEYS: lock. ARGV: acquisition id, lease_ms[, hold count]. The watchdog's renewal, and with a count a re-entry or
// an inner release: the count is set, not added to, so a try repeated after a lost reply counts once.
const Script kRenewScript{"renew", R"lua(
-- Still this acquisition's: extend (never shorten: a re-entry may have granted
-- a longer fixed lease). Anything else (gone, taken over, overwritten by a key
-- of another type) means the holder has lost it.
if redis.pcall('HEXISTS', KEYS[1], ARGV[1]) ~= 1 then return 0 end
if ARGV[3] then redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 1
)lua"};

// KEYS: locks. ARGV: acquisition id, lease_ms, for each lock in turn. The watchdog's renewal of many locks in one
// call: the renew script's test and extension for each, replying {1 renewed | 0 gone, ...} in the same order. One
// call for many spares the server a script's fixed cost (its argument tables, its reply) per lock.
const Script kRenewManyScript{"renew_many", R"lua(
local renewed = {}
for i, lock in ipairs(KEYS) do
  local id, lease = ARGV[2 * i - 1], ARGV[2 * i]
  if redis.pcall('HEXISTS', lock, id) == 1 then
    if redis.call('PTTL', lock) < tonumber(lease) then redis.call('PEXPIRE', lock, lease) end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
)lua"};

// KEYS: lock, fence. ARGV: acquisition id, token, retention_ms. Redlock only: a holder about to use its fencing
// token (the largest of its granting majority's counters) raises each node's counter to it while it still holds
// the lock there, so that any later holder, whose majority shares a node with this one's, draws a larger token.
// Replies 1 raised (or already above), 0 not this acquisition's there.
const Script kRaiseFenceScript{"raise_fence", R"lua(
if redis.pcall('HEXISTS', KEYS[1], ARGV[1]) ~= 1 then return 0 end
local current = redis.pcall('GET', KEYS[2])
if type(current) == 'table' and current.err then
  return redis.error_reply('DLOCK_WRONGTYPE ' .. KEYS[2] .. ' is not a fencing counter')
end
local token = ARGV[2]
if not current then
  redis.call('SET', KEYS[2], token, 'PX', ARGV[3])
elseif #current < #token or (#current == #token and current < token) then
  redis.call('SET', KEYS[2], token, 'KEEPTTL')
end
return 1
)lua"};

// KEYS: lock, fence, queue, alive, turn. ARGV: window_ms. The operator's forced unlock: deletes the lock
// whoever holds it, hands the turn to the oldest live waiter as a release does, and returns the owners removed
// (token, hold count, ...).
const Script kForceReleaseScript{"force_release", kPrelude + R"lua(
local lock, fence, queue, alive, turn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local channel = lock .. ':released'
local bad = line_types_bad(lock, queue, alive, turn)
if bad then return redis.error_reply(bad) end
local window = tonumber(ARGV[1])
local owners = redis.call('HGETALL', lock)
if #owners == 0 then return owners end
forgive_stillness(alive, window, redis.call('ZSCORE', alive, ''))
local head = live_head(queue, alive, redis.call('ZRANGE', queue, 0, 0)[1])
if head then hand_turn(turn, channel, head, window, redis.call('GET', turn)) end
redis.call('DEL', lock)
return owners
)lua"};

ScriptRunner::ScriptRunner(RedisExecutor& redis, ReplicaAcknowledgement acknowledgement)
    : redis_(redis), acknowledgement_(acknowledgement) {
  for (RedisExecutor* node : redis.quorum_nodes()) {
    nodes_.push_back(Node{node, std::make_unique<ScriptRunner>(*node, acknowledgement), node->endpoint(),
                          std::make_unique<std::atomic<std::chrono::steady_clock::rep>>(0)});
  }
}

void ScriptRunner::rest(std::size_t node, std::chrono::steady_clock::time_point now) {
  nodes_[node].resting_until->store((now + kNodeRest).time_since_epoch().count());
}

namespace {

// Whether a majority of the answers so far say yes: the call's outcome is known.
template <bool (*Yes)(const RedisReply&)>
bool majority_said_yes(const std::vector<NodeAnswer>& answers) {
  const auto yes = std::count_if(answers.begin(), answers.end(),
                                 [](const NodeAnswer& a) { return a.reply && a.votes && Yes(*a.reply); });
  return static_cast<std::size_t>(yes) >= majority_of(answers.size());
}
bool is_granted(const RedisReply& r) {
  return (r.type == RedisReply::Type::Integer && r.integer > 0) || r.type == RedisReply::Type::String;
}
bool is_freed(const RedisReply& r) { return r.type == RedisReply::Type::String; }
bool is_one(const RedisReply& r) { return r.type == RedisReply::Type::Integer && r.integer == 1; }

// A split vote's retry comes after a pause of the caller's own, so that callers who split once do not split again.
long long split_vote_jitter_ms() {
  thread_local std::minstd_rand random(std::random_device{}());
  return std::uniform_int_distribution<long long>(1, 10)(random);
}

}  // namespace

void ScriptRunner::load_all() {
  if (quorum()) {
    // Enough nodes to make a majority must have the scripts; the others load them when they come back.
    const auto failures = in_parallel(nodes_.size(), [this](std::size_t i) {
      nodes_[i].scripts->load_all();
      nodes_[i].scripts->load(kRaiseFenceScript);  // Redlock's own
    });
    std::vector<NodeAnswer> answers;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      NodeAnswer answer{nodes_[i].endpoint, std::nullopt, {}, true};
      if (failures[i]) {
        answer.failure = message_of(failures[i]);
      } else {
        answer.reply = RedisReply{};
      }
      answers.push_back(std::move(answer));
    }
    const auto loaded = std::count_if(answers.begin(), answers.end(), [](const NodeAnswer& a) { return a.reply; });
    if (static_cast<std::size_t>(loaded) < majority_of(nodes_.size())) {
      throw ConnectionError("redlock: cannot load the scripts on a majority of the nodes: " + quorum_summary(answers) +
                            "; check the nodes named (redis.redlock.nodes)");
    }
    return;
  }
  for (const Script* script : {&kAcquireScript, &kReleaseScript, &kRenewScript, &kRenewManyScript, &kLeaveScript}) {
    load(*script);
  }
}

std::string_view ScriptRunner::load(const Script& script) {
  RedisReply reply = redis_.command({"SCRIPT", "LOAD", std::string(script.source)});
  if (!transient_state(reply).empty()) {
    throw ConnectionError("redis " + redis_.endpoint() + ": cannot load the " + std::string(script.name) +
                          " script now: " + reply.str);
  }
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
  if (quorum()) return learn_sha(script);
  return load(script);
}

std::string_view ScriptRunner::learn_sha(const Script& script) {
  // A script's SHA is the same on every node: learnt from the first that
  // loads it, it is sent to all, and a node without the script answers
  // NOSCRIPT and loads it then. A node down is never waited for here.
  // First from a node that loaded it already (at start-up): no round trip, and no waiting on a node that is down.
  for (Node& node : nodes_) {
    std::lock_guard node_lock(node.scripts->mutex_);
    auto it = node.scripts->shas_.find(&script);
    if (it == node.scripts->shas_.end()) continue;
    std::lock_guard lock(mutex_);
    return shas_.try_emplace(&script, it->second).first->second;
  }
  std::vector<NodeAnswer> answers;
  for (Node& node : nodes_) {
    try {
      const std::string_view sha = node.scripts->sha_of(script);
      std::lock_guard lock(mutex_);
      return shas_.try_emplace(&script, sha).first->second;
    } catch (const Error& e) {
      answers.push_back(NodeAnswer{node.endpoint, std::nullopt, e.what(), true});
    }
  }
  throw ConnectionError("redlock: no node could load the " + std::string(script.name) +
                        " script: " + quorum_summary(answers));
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
  if (quorum()) return run_on_quorum(script, keys, args);
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

RedisReply ScriptRunner::run_acknowledged(const Script& script, std::span<const std::string_view> keys,
                                          std::span<const std::string_view> args, ReplyTest must_reach_replicas) {
  if (!acknowledges()) return run(script, keys, args);
  const std::vector<std::string> key_list(keys.begin(), keys.end());
  const std::vector<std::string> arg_list(args.begin(), args.end());
  const std::vector<std::uint32_t> one_group{0};
  std::vector<RedisReply> replies = redis_.pipeline(with_waits({evalsha(sha_of(script), key_list, arg_list)}, one_group));
  if (!replies.empty() && is_noscript(replies.front())) {
    replies = redis_.pipeline(with_waits({evalsha(load(script), key_list, arg_list)}, one_group));
  }
  replies = fold_waits(std::move(replies), one_group, must_reach_replicas);
  if (replies.empty()) throw ConnectionError("redis " + redis_.endpoint() + ": no reply to " + std::string(script.name));
  return std::move(replies.front());
}

namespace {

// For each group, the place of its last call.
std::map<std::uint32_t, std::size_t> last_of_each(const std::vector<std::uint32_t>& groups) {
  std::map<std::uint32_t, std::size_t> last;
  for (std::size_t i = 0; i < groups.size(); ++i) last[groups[i]] = i;
  return last;
}

}  // namespace

std::vector<RedisCommand> ScriptRunner::with_waits(std::vector<RedisCommand> calls,
                                                   const std::vector<std::uint32_t>& groups) const {
  if (!acknowledges()) return calls;
  const RedisCommand wait{"WAIT", std::to_string(acknowledgement_.replicas),
                          std::to_string(acknowledgement_.timeout.count())};
  const auto last = last_of_each(groups);
  std::vector<RedisCommand> commands;
  commands.reserve(calls.size() + last.size());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    commands.push_back(std::move(calls[i]));
    if (last.at(groups[i]) == i) commands.push_back(wait);
  }
  return commands;
}

std::vector<RedisReply> ScriptRunner::fold_waits(std::vector<RedisReply> replies,
                                                 const std::vector<std::uint32_t>& groups,
                                                 ReplyTest must_reach_replicas) const {
  if (!acknowledges()) return replies;
  const auto last = last_of_each(groups);
  // Where each call's reply and each group's WAIT reply stand.
  std::vector<std::size_t> call_at(groups.size());
  std::map<std::uint32_t, std::size_t> wait_at;
  std::size_t at = 0;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    call_at[i] = at++;
    if (last.at(groups[i]) == i) wait_at[groups[i]] = at++;
  }
  if (replies.size() < at) return {};  // cut short: no call has a reply to stand on
  std::vector<RedisReply> folded;
  folded.reserve(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    RedisReply& call = replies[call_at[i]];
    const RedisReply& wait = replies[wait_at.at(groups[i])];
    // A call that failed wrote nothing worth waiting for: its own error stands.
    const bool counts = must_reach_replicas ? must_reach_replicas(call) : !call.is_error();
    if (counts && (wait.type != RedisReply::Type::Integer || wait.integer < acknowledgement_.replicas)) {
      const std::string acked =
          wait.type == RedisReply::Type::Integer ? std::to_string(wait.integer) : "WAIT refused: " + wait.str + ";";
      RedisReply refused;
      refused.type = RedisReply::Type::Error;
      refused.str = std::string(kNotAcknowledgedError) + " acknowledged by " + acked + " of the " +
                    std::to_string(acknowledgement_.replicas) + " replicas lock.replica_acks asks for within " +
                    std::to_string(acknowledgement_.timeout.count()) + " ms";
      folded.push_back(std::move(refused));
    } else {
      folded.push_back(std::move(call));
    }
  }
  return folded;
}

std::vector<RedisReply> ScriptRunner::run_pipelined(
    const Script& script, const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>& calls,
    std::chrono::steady_clock::time_point deadline) {
  // One WAIT per group (a cluster's slot, so it goes to the node that took
  // the group's writes; one server: a single WAIT), after the group's last
  // call: a WAIT covers every write before it on its connection, and WAITs
  // in a row would each cost a replication round trip.
  if (quorum()) return run_pipelined_on_quorum(script, calls, deadline);
  std::vector<RedisCommand> commands;
  std::vector<std::uint32_t> groups;
  commands.reserve(calls.size());
  groups.reserve(calls.size());
  const std::string sha(sha_of(script));
  for (const auto& [keys, args] : calls) {
    commands.push_back(evalsha(sha, keys, args));
    groups.push_back(keys.empty() ? 0 : group_of(keys.front()));
  }
  std::vector<RedisReply> replies =
      fold_waits(redis_.urgent_pipeline(with_waits(std::move(commands), groups), deadline), groups);

  // After a restart or SCRIPT FLUSH: load the script and send those again,
  // in one pipeline on the same urgent path (the pool would queue it behind
  // user traffic). SCRIPT LOAD and EVALSHA, not EVAL: the README's minimal
  // ACL grants just those.
  std::vector<std::size_t> retried_at;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (is_noscript(replies[i])) retried_at.push_back(i);
  }
  if (retried_at.empty()) return replies;
  std::vector<RedisCommand> again;
  std::vector<std::uint32_t> again_groups;
  for (std::size_t i : retried_at) {
    again.push_back(evalsha(sha, calls[i].first, calls[i].second));
    again_groups.push_back(groups[i]);
  }
  std::vector<RedisCommand> retries{{"SCRIPT", "LOAD", script.source}};
  for (auto& command : with_waits(std::move(again), again_groups)) retries.push_back(std::move(command));
  std::vector<RedisReply> retried = redis_.urgent_pipeline(retries, deadline);
  if (!retried.empty()) retried.erase(retried.begin());  // SCRIPT LOAD's
  retried = fold_waits(std::move(retried), again_groups);
  for (std::size_t j = 0; j < retried_at.size() && j < retried.size(); ++j) {
    replies[retried_at[j]] = std::move(retried[j]);
  }
  return replies;
}

std::vector<NodeAnswer> ScriptRunner::ask_every_node(const Script& script, std::span<const std::string_view> keys,
                                                     std::span<const std::string_view> args,
                                                     std::chrono::steady_clock::time_point give_up_at,
                                                     Decided decided, bool wait_for_all,
                                                     std::optional<std::chrono::steady_clock::time_point>* decided_at) {
  std::optional<std::chrono::steady_clock::time_point> decided_here;
  if (!decided_at) decided_at = &decided_here;
  const auto started = std::chrono::steady_clock::now();
  SmallBuffer<std::string_view, 16> buffer(3 + keys.size() + args.size());
  const std::span<std::string_view> parts = buffer.span();
  const std::string key_count = std::to_string(keys.size());
  parts[0] = "EVALSHA";
  parts[2] = key_count;
  std::copy(keys.begin(), keys.end(), parts.begin() + 3);
  std::copy(args.begin(), args.end(), parts.begin() + 3 + static_cast<std::ptrdiff_t>(keys.size()));

  // Every node is sent its call before any reply is read: the round trips overlap.
  std::vector<NodeAnswer> answers(nodes_.size());
  std::vector<std::unique_ptr<PendingReply>> pending(nodes_.size());
  parts[1] = sha_of(script);
  const auto sending = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    answers[i].endpoint = nodes_[i].endpoint;
    // A node that just failed is given a rest: calls would otherwise each
    // open a connection to it (and a paused server's backlog fills up).
    answers[i].sent = false;
    if (sending.time_since_epoch().count() < nodes_[i].resting_until->load()) {
      answers[i].failure = "redis " + nodes_[i].endpoint + ": skipped: it failed less than " +
                           std::to_string(kNodeRest.count()) + " ms ago";
      continue;
    }
    try {
      pending[i] = nodes_[i].redis->start(parts);
      answers[i].sent = true;
    } catch (const Error& e) {
      answers[i].failure = e.what();
      rest(i, std::chrono::steady_clock::now());
    }
  }
  // Replies are read as they come, whichever node answers first, until every
  // node answered or gave up, or `decided` says the outcome is known: a node
  // slower than the others (paused, far away) then costs the call nothing,
  // and its reply is left unread (its connection dropped; its command runs).
  std::vector<std::size_t> lost_scripts;
  std::vector<pollfd> watched;
  for (;;) {
    bool waiting = false;
    const auto now = std::chrono::steady_clock::now();
    auto wake = give_up_at;
    watched.clear();
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (!pending[i]) continue;
      try {
        if (std::optional<RedisReply> reply = pending[i]->take_if_arrived()) {
          pending[i].reset();  // its connection goes back to the pool: may_vote may need it
          if (is_noscript(*reply)) {
            lost_scripts.push_back(i);
          } else {
            answers[i].reply = std::move(*reply);
            answers[i].votes = nodes_[i].redis->may_vote();
          }
          continue;
        }
        if (now >= std::min(pending[i]->due(), give_up_at)) {
          answers[i].failure = "redis " + nodes_[i].endpoint + ": no reply in time";
          // Silent for its whole command timeout (not just past this call's own limit): rest it.
          if (now >= pending[i]->due()) rest(i, now);
          pending[i].reset();
          continue;
        }
      } catch (const Error& e) {
        answers[i].failure = e.what();
        pending[i].reset();
        rest(i, now);
        continue;
      }
      waiting = true;
      wake = std::min(wake, pending[i]->due());
      const int fd = pending[i]->ready_fd();
      if (fd < 0) wake = now;  // bytes already in hand: look again at once
      watched.push_back(pollfd{fd, POLLIN, 0});
    }
    if (decided && !*decided_at && decided(answers)) *decided_at = std::chrono::steady_clock::now();
    if (*decided_at) {
      const auto stragglers_until = **decided_at + (**decided_at - started);
      if (!wait_for_all || now >= stragglers_until) break;
      wake = std::min(wake, stragglers_until);
    }
    if (!waiting) break;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    ::poll(watched.data(), watched.size(), static_cast<int>(std::clamp<long long>(left, 0, 1000)));
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!pending[i]) continue;
    answers[i].failure = "redis " + nodes_[i].endpoint + ": not waited for (a majority had answered)";
    pending[i].reset();
  }
  // A node that lost its scripts (a restart, SCRIPT FLUSH) loads them and runs the call again.
  for (std::size_t i : lost_scripts) {
    try {
      answers[i].reply = nodes_[i].scripts->run(script, keys, args);
      answers[i].votes = nodes_[i].redis->may_vote();
    } catch (const Error& e) {
      answers[i].failure = e.what();
    }
  }
  return answers;
}

RedisReply ScriptRunner::run_on_quorum(const Script& script, std::span<const std::string_view> keys,
                                       std::span<const std::string_view> args) {
  if (&script == &kAcquireScript) {
    // The validity is counted from before the first node was sent the call.
    const auto sent = std::chrono::steady_clock::now();
    long long lease_ms = 0;
    std::from_chars(args[1].data(), args[1].data() + args[1].size(), lease_ms);
    const Millis lease(lease_ms);
    // A reply later than the validity's end could not count: it is not waited for.
    const auto valid_until = sent + lease - clock_drift(lease);
    // Once a majority granted, the others are waited for as long again as the
    // majority took (and never past the validity's end): a node left unread
    // may grant after this caller's release reached it on another
    // connection, and hold the lock there, a minority, for one lease. The
    // validity is judged by when the majority had granted.
    std::optional<std::chrono::steady_clock::time_point> granted_at;
    std::vector<NodeAnswer> answers =
        ask_every_node(script, keys, args, valid_until, &majority_said_yes<is_granted>, true, &granted_at);
    const bool validity_spent = (granted_at ? *granted_at : std::chrono::steady_clock::now()) >= valid_until;
    AcquireOutcome outcome = combine_acquire(answers, validity_spent, split_vote_jitter_ms());
    if (!outcome.to_undo.empty()) {
      // A node the acquire never reached has nothing to give back: it is not dialled again.
      std::vector<std::size_t> reached;
      std::vector<bool> answered(answers.size());
      for (std::size_t i : outcome.to_undo) {
        if (answers[i].sent) reached.push_back(i);
      }
      for (std::size_t i = 0; i < answers.size(); ++i) answered[i] = answers[i].reply.has_value();
      if (!reached.empty()) give_back(reached, answered, keys, args);
    }
    if (outcome.outage) throw ConnectionError(*outcome.outage);
    return std::move(outcome.reply);
  }
  const bool renews = &script == &kRenewScript || &script == &kRaiseFenceScript;
  const Decided decided = &script == &kReleaseScript ? &majority_said_yes<is_freed>
                          : renews                   ? &majority_said_yes<is_one>
                                                     : nullptr;
  // A release, renewal or raise left unread on a slow node is harmless: it is
  // owner-checked by the acquisition's id, so arriving late it changes nothing of anyone else's.
  const std::vector<NodeAnswer> answers =
      ask_every_node(script, keys, args, std::chrono::steady_clock::time_point::max(), decided, false, nullptr);
  if (&script == &kReleaseScript) return combine_release(answers);
  if (&script == &kRenewScript) return combine_renew(answers, "renew the lock");
  if (&script == &kRenewManyScript) return combine_renew_many(answers, keys.size());
  if (&script == &kLeaveScript) return combine_leave(answers);
  if (&script == &kForceReleaseScript) return combine_force_release(answers);
  if (&script == &kRaiseFenceScript) return combine_renew(answers, "raise the fencing token");
  throw InvalidArgument("the " + std::string(script.name) + " script has no quorum rule");
}

void ScriptRunner::give_back(const std::vector<std::size_t>& nodes, const std::vector<bool>& answered,
                             std::span<const std::string_view> keys, std::span<const std::string_view> acquire_args) {
  // acquire's ARGV: id, lease, "wait window retention arrival"; release's: id, "window retention".
  const std::string_view settings = acquire_args[2];
  const std::size_t window_at = std::min(settings.size(), settings.find(' ') + 1);
  const std::size_t retention_at = std::min(settings.size(), settings.find(' ', window_at) + 1);
  const std::string_view line_settings = settings.substr(window_at, settings.find(' ', retention_at) - window_at);
  std::string sha;
  try {
    sha = sha_of(kReleaseScript);
  } catch (const Error&) {
    return;  // no node has the scripts: none can have granted anything
  }
  std::vector<std::string> parts{"EVALSHA", sha, std::to_string(keys.size())};
  parts.insert(parts.end(), keys.begin(), keys.end());
  parts.emplace_back(acquire_args[0]);
  parts.emplace_back(line_settings);
  std::vector<std::unique_ptr<PendingReply>> pending(nodes.size());
  for (std::size_t j = 0; j < nodes.size(); ++j) {
    try {
      const std::vector<std::string_view> views(parts.begin(), parts.end());
      pending[j] = nodes_[nodes[j]].redis->start(views);
    } catch (const Error&) {
      // Unreachable: what it granted, nobody renews; it idles out its lease.
    }
  }
  std::vector<std::size_t> lost_scripts;
  for (std::size_t j = 0; j < nodes.size(); ++j) {
    // A node that did not answer the acquire is not waited for again: the
    // release is sent, and runs whenever the node reads it (its connection
    // is dropped unread).
    if (!answered[nodes[j]]) {
      pending[j].reset();
      continue;
    }
    try {
      if (pending[j] && is_noscript(pending[j]->get())) lost_scripts.push_back(nodes[j]);
    } catch (const Error&) {
    }
    pending[j].reset();
  }
  // A node that lost its scripts still has the grant: load the script there and give it back.
  for (std::size_t node : lost_scripts) {
    try {
      const std::vector<std::string_view> release_args{acquire_args[0], line_settings};
      (void)nodes_[node].scripts->run(kReleaseScript, keys, release_args);
    } catch (const Error&) {
    }
  }
}

std::vector<RedisReply> ScriptRunner::run_pipelined_on_quorum(
    const Script& script, const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>& calls,
    std::chrono::steady_clock::time_point deadline) {
  if (&script != &kRenewManyScript) {
    throw InvalidArgument("the " + std::string(script.name) + " script has no pipelined quorum rule");
  }
  std::vector<std::vector<RedisReply>> per_node(nodes_.size());
  const auto failures = in_parallel(nodes_.size(), [&](std::size_t i) {
    per_node[i] = nodes_[i].scripts->run_pipelined(script, calls, deadline);
  });
  std::vector<bool> votes(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) votes[i] = !failures[i] && nodes_[i].redis->may_vote();
  std::vector<RedisReply> combined;
  combined.reserve(calls.size());
  for (std::size_t call = 0; call < calls.size(); ++call) {
    std::vector<NodeAnswer> answers(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      answers[i].endpoint = nodes_[i].endpoint;
      answers[i].votes = votes[i];
      if (failures[i]) {
        answers[i].failure = message_of(failures[i]);
      } else if (call < per_node[i].size()) {
        answers[i].reply = std::move(per_node[i][call]);
      } else {
        answers[i].failure = "no reply";
      }
    }
    combined.push_back(combine_renew_many(answers, calls[call].first.size()));
  }
  return combined;
}

}  // namespace dlock::detail
