-- The final release of a read-write lock's or a semaphore's record.
-- KEYS: record, queue[, set of holders]. ARGV: id, channel.
-- Replies: 1 released | 0 not this acquisition's.
local record, queue, holders = KEYS[1], KEYS[2], KEYS[3]
local id, channel = ARGV[1], ARGV[2]
local mine = redis.pcall('HEXISTS', record, id) == 1
if holders then redis.pcall('SREM', holders, id) end
if not mine then return 0 end
redis.call('DEL', record)
if redis.call('EXISTS', queue) == 1 then redis.call('PUBLISH', channel, '') end
return 1
