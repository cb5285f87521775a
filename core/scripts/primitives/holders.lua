-- Live holders in a set of ids whose records are `set .. ':' .. id`: sums
-- their counts, drops the ids whose records expired (their holders died),
-- and finds the soonest a record may expire. A record overwritten by a key of
-- another type counts as gone, as a lock overwritten is lost.
local function live_holders(set)
  local sum, soonest, ids = 0, nil, redis.call('SMEMBERS', set)
  for _, other in ipairs(ids) do
    local record = set .. ':' .. other
    local held = redis.pcall('HGET', record, other)
    if type(held) == 'string' then
      sum = sum + (tonumber(held) or 0)
      local ttl = redis.call('PTTL', record)
      if ttl >= 0 and (not soonest or ttl < soonest) then soonest = ttl end
    else
      redis.call('SREM', set, other)
    end
  end
  return sum, soonest
end
local function shared_line_types_bad(queue, alive)
  return wrong_type(queue, 'zset') or wrong_type(alive, 'zset')
end
