-- The flash sale's payment step: a call to the provider begins. Counts the calls in flight in a
-- way a killed process cannot inflate: each call is a member of a sorted set scored by its
-- deadline on Redis' clock, and a call whose deadline passed (its process was killed before it
-- could remove itself) stops counting. Then keeps the highest count any call saw.
--
-- KEYS[1]  the calls in flight: sorted set, call id -> deadline (ms, Redis' clock)
-- KEYS[2]  the peak: sorted set with the one member "peak", scored by the highest count seen
-- ARGV[1]  this call's id, unique across processes
-- ARGV[2]  how long this call may count, ms (shorter than a dead holder keeps its permit)
-- Returns the calls in flight, this one included.

local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- Calls past their deadline belong to processes that died mid-call: they no longer count.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[1])
local in_flight = redis.call('ZCARD', KEYS[1])
-- GT: the peak only rises.
redis.call('ZADD', KEYS[2], 'GT', in_flight, 'peak')
return in_flight
