-- The final release of a read-write lock's or a semaphore's record.
-- KEYS: record, queue[, set of holders]. ARGV: id, channel.
-- Replies: 1 released | 0 not this acquisition's: its record is gone, or the
-- holders' index no longer counted it (an eviction or a hand deleted the
-- index), so others may have been let in beside it: the holder is told it
-- lost the hold, as a renewal would tell it. Its record is deleted either way.
local record, queue, holders = KEYS[1], KEYS[2], KEYS[3]
local id, channel = ARGV[1], ARGV[2]
local mine = redis.pcall('HEXISTS', record, id) == 1
local counted = true
if holders then counted = redis.pcall('SREM', holders, id) == 1 end
if not mine then return 0 end
redis.call('DEL', record)
if redis.call('EXISTS', queue) == 1 then redis.call('PUBLISH', channel, '') end
if not counted then return 0 end
return 1
