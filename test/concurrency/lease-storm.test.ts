// A storm (probabilistic): ConcurrencyLimiter workers acquire and release on 4 keys that
// share one probe chain (forceHash), with claimTimeoutMs 1 on an oversubscribed host (a holder
// preempted for over 1 ms is taken over), while the main thread sweeps without pause (reclaims
// take stale locks over; idle keys' slots are reused by other keys) and terminates and replaces
// a worker now and then. Frozen clock: leases never expire. Invariant: the leases counted as held
// on a key never exceed maxInFlight.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter } from '../../src/index.js';
import { FROZEN_MS } from '../helpers/park.js';

const stormWorker = new URL('../fixtures/lease-storm-worker.mjs', import.meta.url);

describe('a lease storm with sweeps and terminations', () => {
  it('never holds more than maxInFlight leases on a key', async () => {
    const KEYS = 4;
    const MAX = 3;
    const WORKERS = 4;
    const limiter = new ConcurrencyLimiter({ maxInFlight: MAX, leaseMs: 3_600_000, maxKeys: 8, claimTimeoutMs: 1, forceHash: 5, clock: { now: () => FROZEN_MS } });
    const ctl = new Int32Array(new SharedArrayBuffer(4 * (2 * KEYS + 1)));
    let seed = 1;
    const spawn = () => new Worker(stormWorker, { workerData: { handle: limiter.handle, keys: KEYS, seed: seed++ * 2654435761, frozenMs: FROZEN_MS, ctl: ctl.buffer } });
    const pool = Array.from({ length: WORKERS }, spawn);
    let swept = 0;
    let kills = 0;
    const end = Date.now() + 4_000;
    let nextKill = Date.now() + 400;
    while (Date.now() < end) {
      swept += limiter.sweep();
      if (Date.now() >= nextKill && kills < 4) {
        const i = kills % WORKERS;
        await (pool[i] as Worker).terminate();
        pool[i] = spawn();
        kills++;
        nextKill = Date.now() + 400;
      }
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(pool.map((w) => w.terminate()));
    const most = Array.from(ctl.subarray(KEYS, 2 * KEYS));
    const admissions = Atomics.load(ctl, 2 * KEYS);
    console.log(`lease storm: admissions ${admissions}, sweeps reclaimed ${swept}, kills ${kills}, most held per key ${most}, casRetries ${limiter.stats().casRetries}`);
    expect(admissions).toBeGreaterThan(1_000);
    expect(Math.max(...most)).toBeLessThanOrEqual(MAX);
  });
});
