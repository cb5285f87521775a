-- What every renewal asks of a hold, included by renew and renew_many: is it
-- still this acquisition's, and its lease extended. A lock's hold is its
-- hash. A read-write lock's reader or a semaphore's permit holder is a record
-- `<set>:<id>` AND its id in `<set>`, the index every acquire counts holders
-- by: a hold whose index entry vanished (deleted, evicted) is no longer
-- counted, others may be let in beside it, so it is lost, and its holder is
-- told as for a record gone. The set lives as long as its longest hold.
local function index_of(key, id)
  local suffix = ':' .. id
  if string.sub(key, -#suffix) == suffix then return string.sub(key, 1, #key - #suffix) end
  return nil
end
local function still_held(key, id)
  if redis.pcall('HEXISTS', key, id) ~= 1 then return false end
  local index = index_of(key, id)
  if not index then return true end
  local member = redis.pcall('SISMEMBER', index, id)
  -- An index overwritten by a key of another type is gone, as a record overwritten is; any other refusal
  -- (an ACL without +sismember) is Redis' answer, not a verdict on the hold: the call fails with it.
  if type(member) == 'table' and not string.find(member.err or '', 'WRONGTYPE', 1, true) then error(member) end
  return member == 1
end
local function extend(key, id, lease)
  if redis.call('PTTL', key) < tonumber(lease) then redis.call('PEXPIRE', key, lease) end
  local index = index_of(key, id)
  if index and redis.call('PTTL', index) < tonumber(lease) then redis.call('PEXPIRE', index, lease) end
end
