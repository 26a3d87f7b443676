// One simulated process of the redis-tier suite's lease runs (forked by bench/redis-tier.js): its
// own client, LocalTier and RedisRateLimiter per run, hammering one key from a few lanes, and every
// admission's time on the common timeline performance.timeOrigin + performance.now().
import { setImmediate as yieldLoop, setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { LocalTier, RedisRateLimiter } from 'sluice';

/** Milliseconds on a timeline every process on this machine shares (to the clocks' skew). */
const abs = () => performance.timeOrigin + performance.now();
/** CLOCK_MONOTONIC in ms, the same in every process: to measure the skew of `abs` between them. */
const mono = () => Number(process.hrtime.bigint()) / 1e6;

/** Calls a lane makes between two turns of the event loop (so that Redis's replies are read). */
const YIELD_EVERY = 64;

let client = null;
let run = null;

async function prepare(cfg) {
  client ??= await new Promise((resolve) => {
    const c = new Redis({ path: cfg.socket });
    c.once('ready', () => resolve(c));
  });
  const tier = cfg.tier ? LocalTier.create({ maxKeys: 1_000, leaseMs: cfg.leaseMs }) : false;
  const limiter = new RedisRateLimiter({
    redis: client, limit: cfg.limit, prefix: cfg.prefix, localTier: tier, ...(cfg.lease > 0 ? { lease: cfg.lease } : {}),
  });
  // A probe (cost 0, counts nothing) on another key: reads Redis's clock and loads the script.
  await limiter.tryAcquire(`${cfg.key}:warm`, 0);
  run = { cfg, tier, limiter };
  const a = abs();
  const m = mono();
  return { abs: a, mono: m };
}

/** Waits until `at` (on `abs`), sleeping most of it and spinning the last 2 ms. */
async function until(at) {
  const left = at - abs() - 2;
  if (left > 0) await sleep(left);
  while (abs() < at);
}

async function go(startAt) {
  const { cfg, tier, limiter } = run;
  const times = [];
  let calls = 0;
  let degraded = 0;
  /** The longest an admitted call took, from the call to its return (Redis counted it in between). */
  let lagMs = 0;
  function admitted(t0) {
    const t1 = abs();
    times.push(t1);
    if (t1 - t0 > lagMs) lagMs = t1 - t0;
  }
  async function hammer(end) {
    for (let n = 1, t0 = abs(); t0 < end; n++, t0 = abs()) {
      const d = await limiter.tryAcquire(cfg.key);
      calls++;
      if (d.degraded) degraded++;
      if (d.allowed) admitted(t0);
      if (n % YIELD_EVERY === 0) await yieldLoop();
    }
  }
  if (cfg.schedule === 'late') {
    // One call at this process's turn (it asks for a lease), nothing until hammerAtMs, then hammer.
    await until(startAt + cfg.index * cfg.staggerMs);
    const t0 = abs();
    const d = await limiter.tryAcquire(cfg.key);
    calls++;
    if (d.degraded) degraded++;
    if (d.allowed) admitted(t0);
  }
  const from = startAt + (cfg.schedule === 'late' ? cfg.hammerAtMs : 0);
  await until(from);
  await Promise.all(Array.from({ length: cfg.lanes }, () => hammer(from + cfg.durationMs)));
  const spanMs = abs() - from;
  const stats = tier ? tier.stats() : { lateSpends: 0, casLosses: 0 };
  return { times: Float64Array.from(times), calls, degraded, spanMs, lagMs, lateSpends: stats.lateSpends, casLosses: stats.casLosses };
}

process.on('message', async (msg) => {
  try {
    if (msg.type === 'prepare') process.send({ type: 'prepared', ...(await prepare(msg.cfg)) });
    else if (msg.type === 'go') process.send({ type: 'done', ...(await go(msg.startAt)) });
    else if (msg.type === 'exit') {
      client?.disconnect();
      process.disconnect();
    }
  } catch (e) {
    process.send({ type: 'error', message: e instanceof Error ? e.stack : String(e) });
  }
});
process.send({ type: 'up' });
