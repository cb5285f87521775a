#include "dlock/detail/shared_scripts.hpp"

namespace dlock::detail {

namespace {

// Live holders in a set of ids whose records are `set .. ':' .. id`: sums
// their counts, drops the ids whose records expired (their holders died),
// and finds the soonest a record may expire. A record overwritten by a key of
// another type counts as gone, as a lock overwritten is lost.
const char* const kHolders = R"lua(
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
)lua";

}  // namespace

const Script& semaphore_acquire_script() {
  static const Script script{"semaphore_acquire", script_prelude() + kHolders + R"lua(
local count, holders, queue, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id, asked, lease = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local wait, window, if_new = string.match(ARGV[4], '^(%d+) (%d+) (%d+)$')
wait, window = tonumber(wait), tonumber(window)
local record = holders .. ':' .. id
local bad = wrong_type(count, 'string') or wrong_type(holders, 'set') or shared_line_types_bad(queue, alive)
  or wrong_type(record, 'hash')
if bad then return redis.error_reply(bad) end
-- A retried call whose grant was never heard of: the grant is adopted if it
-- holds what is asked now; else it is given back and this call asks afresh.
local orphan = redis.call('HGET', record, id)
if orphan then
  if tonumber(orphan) == asked then
    redis.call('PEXPIRE', record, lease)
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
  if head == id then leave_line(queue, alive, id) end
  -- Permits left over: the next in line may fit too.
  if permits - used > asked and redis.call('EXISTS', queue) == 1 then redis.call('PUBLISH', channel, '') end
  return 0
end
if wait > 0 then stay_in_line(queue, alive, id, window, redis.call('ZSCORE', queue, id)) end
-- At the head, short of permits: until a holder's lease may run out (a holder that dies publishes nothing).
if turn and soonest then return -1 - soonest end
return -1 - math.floor(window / 3)
)lua"};
  return script;
}

const Script& read_write_acquire_script() {
  static const Script script{"read_write_acquire", script_prelude() + kHolders + R"lua(
local write, readers, queue, alive, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id, lease, thread = ARGV[1], ARGV[2], ARGV[4]
local mode, wait, window, retention = string.match(ARGV[3], '^([rw]) (%d+) (%d+) (%d+)$')
wait, window = tonumber(wait), tonumber(window)
local member = mode .. id
local record = mode == 'w' and write or readers .. ':' .. id
local bad = wrong_type(write, 'hash') or wrong_type(readers, 'set') or shared_line_types_bad(queue, alive)
  or wrong_type(record, 'hash')
if bad then return redis.error_reply(bad) end
-- A retried call whose grant was never heard of: the grant is adopted (a
-- writer's token is the counter's value: no writer drew since, it held).
if redis.call('HEXISTS', record, id) == 1 then
  redis.call('PEXPIRE', record, lease)
  if mode == 'r' then return 0 end
  local token = redis.call('GET', fence)
  return tonumber(token) and (#token < 16 and tonumber(token) or token) or 0
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
  -- A read inside this thread's own write is granted at once: it waits for nobody.
  granted = string.sub(writer, 1, #thread) == thread
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
)lua"};
  return script;
}

const Script& record_release_script() {
  static const Script script{"record_release", R"lua(
local record, queue, holders = KEYS[1], KEYS[2], KEYS[3]
local id, channel = ARGV[1], ARGV[2]
local mine = redis.pcall('HEXISTS', record, id) == 1
if holders then redis.pcall('SREM', holders, id) end
if not mine then return 0 end
redis.call('DEL', record)
if redis.call('EXISTS', queue) == 1 then redis.call('PUBLISH', channel, '') end
return 1
)lua"};
  return script;
}

const Script& leave_shared_line_script() {
  static const Script script{"leave_shared_line", R"lua(
redis.pcall('ZREM', KEYS[1], ARGV[1])
redis.pcall('ZREM', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
else
  -- Whoever waited behind the one leaving may go now: a reader behind a writer, a small request behind a large one.
  redis.call('PUBLISH', ARGV[2], '')
end
return 1
)lua"};
  return script;
}

const Script& set_permits_script() {
  static const Script script{"set_permits", R"lua(
local current = redis.pcall('GET', KEYS[1])
if type(current) == 'table' then return redis.error_reply('DLOCK_WRONGTYPE ' .. KEYS[1] .. ' is not a permit count') end
redis.call('SET', KEYS[1], ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PUBLISH', ARGV[2], '') end
return 1
)lua"};
  return script;
}

const Script& permits_in_use_script() {
  static const Script script{"permits_in_use", R"lua(
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
)lua"};
  return script;
}

}  // namespace dlock::detail
