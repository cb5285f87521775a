-- KEYS: lock. ARGV: acquisition id, lease_ms[, hold count]. The watchdog's renewal, and with a count a re-entry or
-- an inner release: the count is set, not added to, so a try repeated after a lost reply counts once.
-- Still this acquisition's: extend (never shorten: a re-entry may have granted
-- a longer fixed lease). Anything else (gone, taken over, overwritten by a key
-- of another type) means the holder has lost it.
--@include lock/hold
if not still_held(KEYS[1], ARGV[1]) then return 0 end
if ARGV[3] then redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
extend(KEYS[1], ARGV[1], ARGV[2])
return 1
