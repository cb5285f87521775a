-- A semaphore's count and the permits its live records hold. Reads only.
-- KEYS: count, holders. Replies {count or -1 if none, permits held}.
local permits = redis.pcall('GET', KEYS[1])
if type(permits) == 'table' or (permits and (not string.match(permits, '^%d+$') or #permits > 15)) then
  return redis.error_reply('DLOCK_WRONGTYPE ' .. KEYS[1] .. ' is not a permit count')
end
local count = permits and tonumber(permits)
local used, ids = 0, redis.pcall('SMEMBERS', KEYS[2])
if ids.err then return redis.error_reply('DLOCK_WRONGTYPE ' .. KEYS[2] .. ' is not a set of holders') end
for _, other in ipairs(ids) do
  local held = redis.pcall('HGET', KEYS[2] .. ':' .. other, other)
  if type(held) == 'string' then used = used + (tonumber(held) or 0) end
end
return {count or -1, used}
