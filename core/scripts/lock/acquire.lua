-- KEYS: lock, fence, queue, alive, turn. ARGV: acquisition id, lease_ms, "wait_ms window_ms retention_ms[ arrival_us]"
-- (wait 0: try once, stay out of line; window: the turn window; retention: the fencing counter's; arrival: the
-- caller's place in line, Redlock only, else the server's clock at its first try). A first acquisition
-- only: re-entry renews with a hold count. The settings the fast path does not need travel as one argument: each
-- argument costs the server as much as one call of the script.
-- Replies are scalars, never tables (Redis converts a table reply field by field, which cost the server as much as
-- the rest of the fast path): granted, the fencing token (an integer > 0, or text past 2^53); not granted, the
-- integer -1 - nap, where nap is how long (ms) the caller may sleep before its next try, -1 if the holder set no
-- lease.
-- Free, and nobody in line: the common case, in as few calls as it takes and
-- before the prelude's helpers are defined (defining them costs the server as
-- much as a call). A counter that is new or holds no plain count goes on to
-- be settled below. The keys and arguments get their names after the prelude,
-- so that its helpers see only what they are given (KEYS: lock, fence, queue;
-- ARGV: id, lease).
local drawn
if redis.call('EXISTS', KEYS[1], KEYS[3]) == 0 then
  drawn = redis.pcall('INCR', KEYS[2])
  if type(drawn) == 'number' and drawn > 1 and drawn < 9007199254740992 then
    redis.call('HSET', KEYS[1], ARGV[1], 1)
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return drawn
  end
end
--@include prelude
local lock, fence, queue, alive, turn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id, lease = ARGV[1], ARGV[2]
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
