-- KEYS: lock, fence, queue, alive, turn. ARGV: window_ms, then the ids of one
-- process's waiters in this line. Renews their presence in the line in one
-- call (the line keeper's, every third of the turn window), so that a waiter
-- asleep need not wake to renew its own place: it sleeps to the holder's
-- lease or its wait. Ids no longer in the line are not put back. Reply: an
-- array: first the head of the line, when the lock is free and the head is
-- alive (told again that the turn is its own, unless it was within a third
-- of a window), else an empty string: the caller wakes that waiter if it is
-- one of its own, so a lost notice costs a head no more than a third of a
-- window; then the ids given that are no longer in the line (dropped while
-- the keeper could not reach Redis, or just served): the caller wakes them
-- to try again, which puts a dropped one back in line.
--@include prelude
local lock, queue, alive, turn = KEYS[1], KEYS[3], KEYS[4], KEYS[5]  -- KEYS[2], the fence, is not needed here
local channel = lock .. ':released'
local window = tonumber(ARGV[1])
local bad = line_types_bad(lock, queue, alive, turn)
if bad then return redis.error_reply(bad) end
if redis.call('EXISTS', queue) == 0 then
  local lapsed = {''}
  for i = 2, #ARGV do lapsed[i] = ARGV[i] end
  return lapsed
end
forgive_stillness(alive, window, redis.call('ZSCORE', alive, ''))
local renewed, reply = 0, {''}
for i = 2, #ARGV do
  if redis.call('ZSCORE', queue, ARGV[i]) then
    redis.call('ZADD', alive, now() + window, ARGV[i])
    renewed = renewed + 1
  else
    reply[#reply + 1] = ARGV[i]
  end
end
if renewed > 0 then
  redis.call('ZADD', alive, now(), '')
  local keep = 2 * window
  redis.call('PEXPIRE', queue, keep)
  redis.call('PEXPIRE', alive, keep)
end
if redis.call('EXISTS', lock) == 1 then return reply end
local head = live_head(queue, alive, redis.call('ZRANGE', queue, 0, 0)[1])
if not head then return reply end
hand_turn(turn, channel, head, window, redis.call('GET', turn))
reply[1] = head
return reply
