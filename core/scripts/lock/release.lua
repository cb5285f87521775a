-- KEYS: lock, fence, queue, alive, turn. ARGV: acquisition id, "window_ms retention_ms"[, "candidate
-- candidate_lease_ms may_bypass"]. The final release of an acquisition (inner releases renew with a hold count).
-- The candidate is a waiter of the releasing process, known to be alive and asleep in line: the release grants it
-- the lock outright, sparing it the round trip of its own acquire, if it is the head of the line or if may_bypass
-- is '1' (the lock has not yet stayed in the releaser's process too many times in a row).
-- Replies: 0, not this acquisition's (nothing changed); text, released, naming the waiter told of its turn ('' if
-- none); a one-element array {token}, handed over to the candidate with that fencing token.
-- Before the prelude, the keys and arguments go by KEYS[1] (lock), KEYS[3]
-- (queue) and ARGV[1] (id): the keys' names come after it, so that its helpers
-- see only what they are given.
local held = redis.pcall('HEXISTS', KEYS[1], ARGV[1])
-- Not this acquisition's (expired, taken over, never held): change nothing.
if held == 0 then return 0 end
-- Nobody waits: free it, and tell nobody; before the prelude, as acquire's fast path.
if held == 1 and redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[1])
  return ''
end
if type(held) ~= 'number' then
  if not string.find(held.err or '', 'WRONGTYPE', 1, true) then return held end
  return redis.error_reply('DLOCK_WRONGTYPE ' .. KEYS[1] .. ' is not a hash')
end
--@include prelude
local lock, fence, queue, alive, turn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
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
