-- KEYS: the read-write lock's writer record, set of readers, line and fencing
-- counter; the semaphore's count, set of holders and line. Each set's records
-- are read as {id, count, pttl, ...}; a record that expired is left out. A
-- part Redis refuses (a missing right, a name of another type) comes back as
-- that error in its place, so the other parts are still read. Reads only.
local write, readers, count, holders = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local rw_queue, semaphore_queue, rw_fence = KEYS[5], KEYS[6], KEYS[7]
local function records(set)
  local ids = redis.pcall('SMEMBERS', set)
  if ids.err then return ids end
  local out = {}
  for _, id in ipairs(ids) do
    local record = set .. ':' .. id
    local n = redis.pcall('HGET', record, id)
    if type(n) == 'string' then
      out[#out + 1] = id
      out[#out + 1] = n
      out[#out + 1] = redis.call('PTTL', record)
    end
  end
  return out
end
return {
  redis.pcall('HGETALL', write), redis.call('PTTL', write), records(readers),
  redis.pcall('GET', count), records(holders),
  redis.pcall('ZCARD', rw_queue), redis.pcall('ZCARD', semaphore_queue), redis.pcall('GET', rw_fence),
}
