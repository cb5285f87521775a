// node-redlock under contention: one client of several processes on one key,
// each holder doing a non-atomic GET/SET increment, as dlock-bench's
// contention workers do:
//   node redlock_contend.js HOST PORT START_NS UNTIL_NS
// prints each acquisition's time-to-acquire in nanoseconds, one per line.
// START_NS and UNTIL_NS are CLOCK_MONOTONIC (process.hrtime), the clock every
// process of bench/peers/contention.sh shares, so all clients start together.
// Redlock's default retry settings (200 ms apart, 100 ms jitter) except the
// count: a waiter here retries until it gets the lock (retryCount -1), as a
// blocking lock() does, rather than failing after 10 tries.
"use strict";

const Redis = require("ioredis");
const Redlock = require("redlock").default;

const kKey = "bench:peers:contended:node";
const kCounter = "bench:peers:contended:node:counter";
const kLeaseMs = 30000;

async function main() {
  const [host, port, startNs, untilNs] = process.argv.slice(2);
  if (!host || !port || !untilNs) {
    console.error("usage: node redlock_contend.js HOST PORT START_NS UNTIL_NS");
    process.exit(64);
  }
  const redis = new Redis({ host, port: Number(port), lazyConnect: true });
  await redis.connect();
  const redlock = new Redlock([redis], { retryCount: -1 });
  const start = BigInt(startNs);
  const until = BigInt(untilNs);
  while (process.hrtime.bigint() < start) await new Promise((resolve) => setTimeout(resolve, 1));
  const waits = [];
  while (process.hrtime.bigint() < until) {
    const called = process.hrtime.bigint();
    const lock = await redlock.acquire([kKey], kLeaseMs);
    waits.push(process.hrtime.bigint() - called);
    const value = Number((await redis.get(kCounter)) ?? 0);
    await redis.set(kCounter, String(value + 1));
    await lock.release();
  }
  process.stdout.write(waits.map((w) => `${w}\n`).join(""));
  redis.disconnect();
}

main().catch((error) => {
  console.error(`redlock_contend: ${error.message}`);
  process.exit(1);
});
