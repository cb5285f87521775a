-- KEYS: lock, fence. ARGV: acquisition id, token, retention_ms. Redlock only: a holder about to use its fencing
-- token (the largest of its granting majority's counters) raises each node's counter to it while it still holds
-- the lock there, so that any later holder, whose majority shares a node with this one's, draws a larger token.
-- Replies 1 raised (or already above), 0 not this acquisition's there.
if redis.pcall('HEXISTS', KEYS[1], ARGV[1]) ~= 1 then return 0 end
local current = redis.pcall('GET', KEYS[2])
if type(current) == 'table' and current.err then
  return redis.error_reply('DLOCK_WRONGTYPE ' .. KEYS[2] .. ' is not a fencing counter')
end
local token = ARGV[2]
if not current then
  redis.call('SET', KEYS[2], token, 'PX', ARGV[3])
elseif #current < #token or (#current == #token and current < token) then
  redis.call('SET', KEYS[2], token, 'KEEPTTL')
end
return 1
