#!/usr/bin/python3
"""redis-py's Lock under contention: one client of several processes on one
key, each holder doing a non-atomic GET/SET increment, as dlock-bench's
contention workers do.

    /usr/bin/python3 redis_py_contend.py HOST PORT START_NS UNTIL_NS

prints each acquisition's time-to-acquire in nanoseconds, one per line.
START_NS and UNTIL_NS are CLOCK_MONOTONIC (time.monotonic_ns), the clock every
process of bench/peers/contention.sh shares, so all clients start together.
The Lock as its documentation shows a user: r.lock(name, timeout=30) and a
blocking acquire(), which polls the key every 0.1 s (its default `sleep`)
while another process holds it.
"""
import sys
import time

import redis

KEY = "bench:peers:contended:py"
COUNTER = "bench:peers:contended:py:counter"


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: redis_py_contend.py HOST PORT START_NS UNTIL_NS")
    host, port = sys.argv[1], int(sys.argv[2])
    start_ns, until_ns = int(sys.argv[3]), int(sys.argv[4])
    client = redis.Redis(host=host, port=port)
    lock = client.lock(KEY, timeout=30)
    client.ping()  # connect before the start, as the other clients do
    while time.monotonic_ns() < start_ns:
        time.sleep(0.001)
    waits = []
    while time.monotonic_ns() < until_ns:
        called = time.monotonic_ns()
        if not lock.acquire():
            sys.exit(f"redis_py_contend: lock {KEY} refused")
        waits.append(time.monotonic_ns() - called)
        client.set(COUNTER, int(client.get(COUNTER) or 0) + 1)
        lock.release()
    sys.stdout.write("".join(f"{w}\n" for w in waits))


if __name__ == "__main__":
    main()
