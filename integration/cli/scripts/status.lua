-- KEYS: lock hash, fencing counter. One atomic read, so a release in between
-- never shows an owner without its lease. Reads only: runs on a replica too.
return {redis.call('HGETALL', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
