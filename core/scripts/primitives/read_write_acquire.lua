-- A read-write lock's acquire, of a read (r) or the write (w).
-- KEYS: write, readers, queue, alive, fence. ARGV: id, lease_ms,
-- "r|w wait_ms window_ms retention_ms"[, the acquisition id of the write hold
-- the caller re-enters as a reader: its owner holds it, not detached, as the
-- client alone knows; a read inside it is granted at once].
-- Replies: granted, the fencing token (a write's; 0 for a read); not granted,
-- -1 - nap (ms the caller may sleep before its next try); errors DLOCK_WRONGTYPE.
--@include prelude
--@include primitives/holders
local write, readers, queue, alive, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id, lease, own_write = ARGV[1], ARGV[2], ARGV[4]
local mode, wait, window, retention = string.match(ARGV[3], '^([rw]) (%d+) (%d+) (%d+)$')
wait, window = tonumber(wait), tonumber(window)
local member = mode .. id
local record = mode == 'w' and write or readers .. ':' .. id
local bad = wrong_type(write, 'hash') or wrong_type(readers, 'set') or shared_line_types_bad(queue, alive)
  or wrong_type(record, 'hash')
if bad then return redis.error_reply(bad) end
-- A retried call whose grant was never heard of: the grant is adopted. As a
-- lock's, a writer's token was never handed to anyone and may be gone with
-- its counter: a new one is drawn, larger than any handed out before.
-- A reader's grant counts only while its id is in the index: one that
-- vanished from it is given back, and this call asks afresh.
if mode == 'r' and redis.call('HEXISTS', record, id) == 1 and redis.call('SISMEMBER', readers, id) == 0 then
  redis.call('DEL', record)
end
if redis.call('HEXISTS', record, id) == 1 then
  if mode == 'r' then
    redis.call('PEXPIRE', record, lease)
    if redis.call('PTTL', readers) < tonumber(lease) then redis.call('PEXPIRE', readers, lease) end
    return 0
  end
  local token, refused = draw_fence(fence, retention)
  if not token then return refused or not_a_counter(fence) end
  redis.call('PEXPIRE', record, lease)
  return token
end
local channel = string.sub(write, 1, #write - #':write') .. ':released'
forgive_stillness(alive, window, redis.call('ZSCORE', alive, ''))
local head = live_head(queue, alive, redis.call('ZRANGE', queue, 0, 0)[1])
local writer = redis.call('HKEYS', write)[1]
local granted, nap = false, nil
if mode == 'w' then
  if writer then
    nap = redis.call('PTTL', write)
  else
    local reading, soonest = live_holders(readers)
    nap = soonest
    -- In arrival order: only the head of the line, or anyone when nobody waits.
    granted = reading == 0 and (head == nil or head == member)
  end
elseif writer then
  -- A read inside its owner's own write hold is granted at once: it waits for
  -- nobody. Decided by the exact acquisition id the client names: a detached
  -- write, or another of the same thread's, is held against it as against anyone.
  granted = own_write ~= nil and writer == own_write
  if not granted then nap = redis.call('PTTL', write) end
else
  -- Readers go together, but never past a live writer that arrived before them.
  local place = redis.call('ZSCORE', queue, member)
  local ahead = place and redis.call('ZRANGEBYSCORE', queue, '-inf', '(' .. place) or redis.call('ZRANGE', queue, 0, -1)
  granted = true
  for _, other in ipairs(ahead) do
    if string.sub(other, 1, 1) == 'w' then
      local until_ms = tonumber(redis.call('ZSCORE', alive, other))
      if until_ms and until_ms > now() then
        granted = false
        break
      end
    end
  end
end
if granted then
  local token = 0
  if mode == 'w' then
    local refused
    token, refused = draw_fence(fence, retention)
    if not token then return refused or not_a_counter(fence) end
  else
    redis.call('SADD', readers, id)
    -- The index lives as long as its longest hold (renewals extend it too).
    if redis.call('PTTL', readers) < tonumber(lease) then redis.call('PEXPIRE', readers, lease) end
  end
  redis.call('HSET', record, id, 1)
  redis.call('PEXPIRE', record, lease)
  if redis.call('ZSCORE', queue, member) then leave_line(queue, alive, member) end
  -- Readers behind this one may go along.
  if mode == 'r' and redis.call('EXISTS', queue) == 1 then redis.call('PUBLISH', channel, '') end
  return token
end
if wait > 0 then stay_in_line(queue, alive, member, window, redis.call('ZSCORE', queue, member)) end
if nap and nap >= 0 then return -1 - math.min(nap, math.floor(window / 3)) end
return -1 - math.floor(window / 3)
