// node-redlock's uncontended lock+unlock cycle on one key, timed:
//   node redlock_cycles.js HOST PORT SECONDS   -> prints cycles per second
// Redlock with one Redis and its default settings, as its README shows a
// user: retries (10 × 200 ms) only matter when the lock is busy, and this
// key is never contended. Each cycle is one EVALSHA of redlock's acquire
// script (EXISTS, then SET value PX) and one of its release script (GET,
// then DEL if the value is ours): not reentrant, not fair, no fencing token.
"use strict";

const Redis = require("ioredis");
const Redlock = require("redlock").default;

const kLeaseMs = 30000;
// Untimed cycles first, long enough for V8 to optimise the loop (after 100
// warm-up cycles, 0.3 s runs measured about a quarter of the rate they
// measured after 0.5 s).
const kWarmUpNs = 500_000_000n;

async function main() {
  const [host, port, seconds] = process.argv.slice(2);
  if (!host || !port || !(Number(seconds) > 0)) {
    console.error("usage: node redlock_cycles.js HOST PORT SECONDS");
    process.exit(64);
  }
  const redis = new Redis({ host, port: Number(port), lazyConnect: true });
  await redis.connect();
  const redlock = new Redlock([redis]);
  const cycle = async () => {
    const lock = await redlock.acquire(["bench:peers:node"], kLeaseMs);
    await lock.release();
  };

  const warmUpEnd = process.hrtime.bigint() + kWarmUpNs;
  while (process.hrtime.bigint() < warmUpEnd) await cycle();
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(Number(seconds) * 1e9));
  let cycles = 0;
  let now = start;
  while (now < end) {
    await cycle();
    ++cycles;
    now = process.hrtime.bigint();
  }
  console.log((cycles / (Number(now - start) / 1e9)).toFixed(0));
  redis.disconnect();
}

main().catch((error) => {
  console.error(`redlock_cycles: ${error.message}`);
  process.exit(1);
});
