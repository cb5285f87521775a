-- KEYS: lock hash, fencing counter, line. One atomic read, so a release in
-- between never shows an owner without its lease. Reads only: runs on a
-- replica too. The line's length is read with pcall: a user without +zcard
-- still reads the lock, and the waiters come back as that error (unknown).
return {redis.call('HGETALL', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]),
        redis.pcall('ZCARD', KEYS[3])}
