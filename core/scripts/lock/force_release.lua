-- KEYS: lock, fence, queue, alive, turn. ARGV: window_ms. The operator's forced unlock: deletes the lock
-- whoever holds it, hands the turn to the oldest live waiter as a release does, and returns the owners removed
-- (token, hold count, ...).
--@include prelude
local lock, queue, alive, turn = KEYS[1], KEYS[3], KEYS[4], KEYS[5]  -- KEYS[2], the fence, is not needed here
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
