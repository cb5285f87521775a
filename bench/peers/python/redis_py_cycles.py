#!/usr/bin/python3
"""redis-py's Lock, uncontended lock+unlock on one key, timed.

    /usr/bin/python3 redis_py_cycles.py HOST PORT SECONDS  -> prints cycles per second

Debian's python3-redis (4.3.4), its pure-Python reply parser (python3-hiredis
is not installed with it), and the Lock as its documentation shows a user:
r.lock(name, timeout=30), a blocking acquire() (never blocks here: the key is
this client's alone), release(). Each cycle is one SET token NX PX (a new
uuid1 token per acquisition) and one EVALSHA of its release script (GET,
then DEL if the token is ours): not reentrant, not fair, no fencing token.
The first 100 cycles are not timed.
"""
import sys
import time

import redis

WARM_UP_CYCLES = 100


def main():
    if len(sys.argv) != 4 or not float(sys.argv[3]) > 0:
        sys.exit("usage: redis_py_cycles.py HOST PORT SECONDS")
    host, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    client = redis.Redis(host=host, port=port)
    lock = client.lock("bench:peers:py", timeout=30)

    def cycle():
        if not lock.acquire():
            sys.exit("redis_py_cycles: lock bench:peers:py refused")
        lock.release()

    for _ in range(WARM_UP_CYCLES):
        cycle()
    start = time.perf_counter()
    end = start + seconds
    cycles = 0
    now = start
    while now < end:
        cycle()
        cycles += 1
        now = time.perf_counter()
    print(f"{cycles / (now - start):.0f}")


if __name__ == "__main__":
    main()
