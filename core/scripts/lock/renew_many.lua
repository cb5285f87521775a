-- KEYS: locks. ARGV: acquisition id, lease_ms, for each lock in turn. The watchdog's renewal of many locks in one
-- call: the renew script's test and extension for each, replying {1 renewed | 0 gone, ...} in the same order. One
-- call for many spares the server a script's fixed cost (its argument tables, its reply) per lock.
--@include lock/hold
local renewed = {}
for i, lock in ipairs(KEYS) do
  local id, lease = ARGV[2 * i - 1], ARGV[2 * i]
  if still_held(lock, id) then
    extend(lock, id, lease)
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
