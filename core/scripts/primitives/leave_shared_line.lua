-- Leaves a read-write lock's or semaphore's line after a wait ran out, and
-- tells those still in it (they may have waited only behind the one leaving).
-- KEYS: queue, alive. ARGV: the waiter's member, channel. Replies 1.
redis.pcall('ZREM', KEYS[1], ARGV[1])
redis.pcall('ZREM', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
else
  -- Whoever waited behind the one leaving may go now: a reader behind a writer, a small request behind a large one.
  redis.call('PUBLISH', ARGV[2], '')
end
return 1
