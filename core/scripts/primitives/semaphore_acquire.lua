-- A semaphore's acquire: takes `asked` permits, strictly in arrival order.
-- KEYS: count, holders, queue, alive. ARGV: id, permits asked, lease_ms,
-- "wait_ms window_ms count_if_new" (count_if_new 0: the count must exist).
-- Replies: 0 granted; -1 - nap (ms the caller may sleep before its next try);
-- errors DLOCK_WRONGTYPE, DLOCK_TOO_MANY <permits>, DLOCK_NO_PERMITS.
--@include prelude
--@include primitives/holders
local count, holders, queue, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, asked, lease = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local wait, window, if_new = string.match(ARGV[4], '^(%d+) (%d+) (%d+)$')
wait, window = tonumber(wait), tonumber(window)
local record = holders .. ':' .. id
local bad = wrong_type(count, 'string') or wrong_type(holders, 'set') or shared_line_types_bad(queue, alive)
  or wrong_type(record, 'hash')
if bad then return redis.error_reply(bad) end
-- A retried call whose grant was never heard of: the grant is adopted if it
-- holds what is asked now and is still counted (its id in the index); else it
-- is given back and this call asks afresh.
local orphan = redis.call('HGET', record, id)
if orphan then
  if tonumber(orphan) == asked and redis.call('SISMEMBER', holders, id) == 1 then
    redis.call('PEXPIRE', record, lease)
    if redis.call('PTTL', holders) < tonumber(lease) then redis.call('PEXPIRE', holders, lease) end
    return 0
  end
  redis.call('DEL', record)
  redis.call('SREM', holders, id)
  if redis.call('EXISTS', queue) == 1 then redis.call('PUBLISH', count .. ':released', '') end
end
local permits = redis.call('GET', count)
local new = not permits
if new then
  if if_new == '0' then return redis.error_reply('DLOCK_NO_PERMITS no permit count set') end
  permits = if_new
end
-- Digits only, and few enough to be exact ("inf", "1e3", "-2" and the like are no count).
if not string.match(permits, '^%d+$') or #permits > 15 then
  return redis.error_reply('DLOCK_WRONGTYPE ' .. count .. ' is not a permit count')
end
permits = tonumber(permits)
if asked > permits then return redis.error_reply('DLOCK_TOO_MANY ' .. permits) end
if new then redis.call('SET', count, permits) end
local channel = count .. ':released'
forgive_stillness(alive, window, redis.call('ZSCORE', alive, ''))
local head = live_head(queue, alive, redis.call('ZRANGE', queue, 0, 0)[1])
local used, soonest = live_holders(holders)
-- Strictly in arrival order: a large request at the head is never passed by smaller ones behind it.
local turn = head == nil or head == id
if turn and permits - used >= asked then
  redis.call('HSET', record, id, asked)
  redis.call('PEXPIRE', record, lease)
  redis.call('SADD', holders, id)
  -- The index lives as long as its longest hold (renewals extend it too).
  if redis.call('PTTL', holders) < tonumber(lease) then redis.call('PEXPIRE', holders, lease) end
  if head == id then leave_line(queue, alive, id) end
  -- Permits left over: the next in line may fit too.
  if permits - used > asked and redis.call('EXISTS', queue) == 1 then redis.call('PUBLISH', channel, '') end
  return 0
end
if wait > 0 then stay_in_line(queue, alive, id, window, redis.call('ZSCORE', queue, id)) end
-- At the head, short of permits: until a holder's lease may run out (a holder that dies publishes nothing).
if turn and soonest then return -1 - soonest end
return -1 - math.floor(window / 3)
