-- Sets a semaphore's permit count, waking its waiters.
-- KEYS: count, queue. ARGV: permits, channel. Replies 1.
local current = redis.pcall('GET', KEYS[1])
if type(current) == 'table' then return redis.error_reply('DLOCK_WRONGTYPE ' .. KEYS[1] .. ' is not a permit count') end
redis.call('SET', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PUBLISH', ARGV[2], '') end
return 1
