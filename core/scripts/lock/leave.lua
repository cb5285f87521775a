-- KEYS: lock, fence, queue, alive, turn. ARGV: acquisition id, window_ms. A waiter that gives up.
--@include prelude
local lock, queue, alive, turn = KEYS[1], KEYS[3], KEYS[4], KEYS[5]  -- KEYS[2], the fence, is not needed here
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
