-- KEYS: the read-write lock's writer record and set of readers, the
-- semaphore's count and set of holders. Each set's records are read as
-- {id, count, pttl, ...}; a record that expired is left out. Reads only.
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
local writer = redis.pcall('HGETALL', KEYS[1])
local count = redis.pcall('GET', KEYS[3])
return {writer, redis.call('PTTL', KEYS[1]), records(KEYS[2]), count or '', records(KEYS[4])}
