-- KEYS: a read-write lock's or a semaphore's set of holders, its line, and
-- (a read-write lock's) its writer's record. ARGV: the holder to remove ('':
-- every one), the channel its waiters listen on.
-- The operator's forced unlock: deletes the holders' records and takes them
-- out of the set, then wakes the line as a release does (its waiters try
-- again, in arrival order). Replies {id, count, 'writer' | 'holder', ...},
-- what was removed; an expired record's id left in the set is dropped unsaid.
local set, queue, writer = KEYS[1], KEYS[2], KEYS[3]
local only, channel = ARGV[1], ARGV[2]
-- Every check before the first write: Redis does not undo a script that fails midway.
local expected = {{set, 'set'}, {queue, 'zset'}, {writer, 'hash'}}
for _, name_type in ipairs(expected) do
  local name, wanted = name_type[1], name_type[2]
  local actual = name and redis.call('TYPE', name).ok
  if actual and actual ~= wanted and actual ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. name .. ' holds a ' .. actual .. ', not a ' .. wanted)
  end
end
local removed = {}
local function report(id, count, what)
  removed[#removed + 1] = id
  removed[#removed + 1] = count
  removed[#removed + 1] = what
end
if writer then
  local fields = redis.call('HGETALL', writer)
  if #fields >= 2 and (only == '' or fields[1] == only) then
    redis.call('DEL', writer)
    report(fields[1], fields[2], 'writer')
  end
end
for _, id in ipairs(redis.call('SMEMBERS', set)) do
  if only == '' or id == only then
    local record = set .. ':' .. id
    local count = redis.pcall('HGET', record, id)
    -- A name that is no holder's record is left alone: it may be another program's.
    if type(count) == 'string' then
      redis.call('DEL', record)
      report(id, count, 'holder')
    end
    redis.call('SREM', set, id)
  end
end
if #removed > 0 and redis.call('EXISTS', queue) == 1 then redis.call('PUBLISH', channel, '') end
return removed
