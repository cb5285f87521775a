-- The helpers the lock's scripts share, included where a script says
-- `--@include prelude` (cmake/embed_lua.cmake pastes it in at build time).
--
-- Redis does not roll back a script that fails midway, so each script checks
-- everything that can fail before its first write.
--
-- Every script that touches the line takes the same five keys (LockNames::
-- script_keys): lock, fence, queue, alive, turn; the channel's name is the
-- lock's with ':released' (a channel is no key). The line is two
-- sorted sets: `queue` orders waiters by arrival (µs, server clock), `alive`
-- holds the time (ms) until which each is presumed alive; a waiter renews it
-- on every try, at least every third of the turn window. A waiter not heard
-- from for a whole window is dropped by whichever script next looks at the
-- head of the line: a dead waiter costs the others at most one window, and a
-- live one never loses its place. While the lock is free, it belongs to the
-- oldest live waiter (the head); `turn` remembers, for a third of a window,
-- that the head was told so, so that it is not told again on every try.
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
  return wrong_type(lock, 'hash') or wrong_type(queue, 'zset') or wrong_type(alive, 'zset')
    or wrong_type(turn, 'string')
end
local function not_a_counter(fence)
  return redis.error_reply('DLOCK_WRONGTYPE ' .. fence .. ' is not a fencing counter')
end
