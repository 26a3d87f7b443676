// Storms (probabilistic): ConcurrencyLimiter workers acquire and release on 4 keys that
// share one probe chain (forceHash), with claimTimeoutMs 1 on an oversubscribed host (a holder
// preempted for over 1 ms is taken over), while the main thread sweeps without pause (reclaims
// take stale locks over; idle keys' slots are reused by other keys) and terminates and replaces
// a worker now and then. Frozen clock: leases never expire. Invariant: the leases counted as held
// on a key never exceed maxInFlight.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter, ManualClock } from '../../src/index.js';
import { FROZEN_MS, stagedReuse, STORM_REUSE_MS } from '../helpers/park.js';
import { mulberry32 } from '../helpers/random.js';
import { compactedSlots, duplicateKeys, liveCopies, liveHashes } from '../helpers/table-scan.js';
import { soakOr } from '../helpers/soak.js';

const stormWorker = new URL('../fixtures/lease-storm-worker.mjs', import.meta.url);

/**
 * The main thread's side of a storm: `turn()` while `going()`, yielding to the event loop after
 * each, and every 400 ms one of the 4 workers (from `spawn`) terminated and replaced, four times
 * in all; then every worker terminated. Returns the kills.
 */
async function mainThread(spawn: () => Worker, going: () => boolean, turn: () => void): Promise<number> {
  const pool = Array.from({ length: 4 }, spawn);
  let kills = 0;
  let nextKill = Date.now() + 400;
  while (going()) {
    turn();
    if (Date.now() >= nextKill && kills < 4) {
      const i = kills % pool.length;
      await (pool[i] as Worker).terminate();
      pool[i] = spawn();
      kills++;
      nextKill = Date.now() + 400;
    }
    await new Promise((r) => setImmediate(r));
  }
  await Promise.all(pool.map((w) => w.terminate()));
  return kills;
}

describe('a lease storm with sweeps and terminations', () => {
  it('never holds more than maxInFlight leases on a key', async () => {
    const KEYS = 4;
    const MAX = 3;
    const limiter = new ConcurrencyLimiter({ maxInFlight: MAX, leaseMs: 3_600_000, maxKeys: 8, claimTimeoutMs: 1, forceHash: 5, clock: { now: () => FROZEN_MS } });
    const ctl = new Int32Array(new SharedArrayBuffer(4 * (2 * KEYS + 1)));
    let seed = 1;
    const spawn = () => new Worker(stormWorker, { workerData: { handle: limiter.handle, keys: KEYS, seed: seed++ * 2654435761, frozenMs: FROZEN_MS, ctl: ctl.buffer } });
    let swept = 0;
    const end = Date.now() + soakOr(1_500, 4_000);
    // And on until the workers made 1,000 admissions, however slowly a busy machine starts them
    // (within 30 s more): found beside two CPU-bound loops, 0 and 580 admissions in 1.5 s.
    const kills = await mainThread(spawn, () => Date.now() < end || (Atomics.load(ctl, 2 * KEYS) <= 1_000 && Date.now() < end + 30_000), () => { swept += limiter.sweep(); });
    const most = Array.from(ctl.subarray(KEYS, 2 * KEYS));
    const admissions = Atomics.load(ctl, 2 * KEYS);
    console.log(`lease storm: admissions ${admissions}, sweeps reclaimed ${swept}, kills ${kills}, most held per key ${most}, casRetries ${limiter.stats().casRetries}`);
    expect(admissions).toBeGreaterThan(1_000);
    expect(Math.max(...most)).toBeLessThanOrEqual(MAX);
  });

  // The same storm while the main thread resets keys (ConcurrencyLimiter.reset: every place
  // freed, under the key's lock) between its sweeps. A reset frees the places of leases still
  // held, so what is checked is the leases taken since a key's last reset: a lease counts in the
  // generation of its key (resets done) when no reset was under way or done while it was taken,
  // and no generation of a key ever counts more than maxInFlight at once (a release of a lease
  // from before a reset that freed a later lease's place would show here).
  it('with resets: never more than maxInFlight leases taken since the key\'s last reset', async () => {
    // One place per key and two keys for four workers: two holders of a key at once, which two
    // cores give often, are already one too many.
    const KEYS = 2;
    const MAX = 1;
    const GENS = 400;
    const limiter = new ConcurrencyLimiter({ maxInFlight: MAX, leaseMs: 3_600_000, maxKeys: 8, claimTimeoutMs: 1, forceHash: 5, clock: { now: () => FROZEN_MS } });
    const ctl = new Int32Array(new SharedArrayBuffer(4 * (2 * KEYS + 1)));
    const resets = new Int32Array(new SharedArrayBuffer(4 * 2 * KEYS));
    const heldGen = new SharedArrayBuffer(4 * KEYS * GENS);
    let seed = 7;
    const spawn = () => new Worker(stormWorker, {
      workerData: { handle: limiter.handle, keys: KEYS, seed: seed++ * 2654435761, frozenMs: FROZEN_MS, ctl: ctl.buffer, resets: resets.buffer, gens: GENS, heldGen },
    });
    const random = mulberry32(20261203);
    let made = 0;
    let found = 0;
    const end = Date.now() + soakOr(1_500, 4_000);
    // At least 20 resets, however slowly a busy machine runs the workers (within 30 s more).
    const kills = await mainThread(spawn, () => Date.now() < end || (made < 20 && Date.now() < end + 30_000), () => {
      limiter.sweep();
      // Paced by the workers' admissions (a reset every 3,000 or so), so that resets land among
      // leases held from the first to the last.
      if (made < GENS - 1 && Atomics.load(ctl, 2 * KEYS) >= (made + 1) * 3_000 && random() < 0.5) {
        const k = Math.floor(random() * KEYS);
        Atomics.add(resets, k, 1); // under way
        if (limiter.reset(`key${k}`)) found++;
        Atomics.add(resets, KEYS + k, 1); // done: a new generation
        made++;
      }
    });
    const most = Array.from(ctl.subarray(KEYS, 2 * KEYS));
    const admissions = Atomics.load(ctl, 2 * KEYS);
    console.log(`lease storm with resets: admissions ${admissions}, resets ${made} (${found} found places held), kills ${kills}, most held per key in one generation ${most}`);
    expect(admissions).toBeGreaterThan(1_000);
    expect(found, 'resets that freed places held').toBeGreaterThan(0);
    expect(Math.max(...most)).toBeLessThanOrEqual(MAX);
    // Some generation of some key had all its places taken: the bound was reached, not just kept.
    expect(Math.max(...most)).toBe(MAX);
  });
});

// The kill storm of test/rate/kill-storm.test.ts for leases. Rounds of four workers (the fixture
// with `churn`) acquire, hold and release leases on 4 hot keys, probe (insert) 8 shared keys that
// stay idle, and sweep; every key hashes alike (forceHash: one probe chain of 16 slots), so
// reclaims leave tombstones inside live chains and every sweep has compaction work. Each worker
// is terminated at a moment of real time drawn by a seeded generator, so terminations land inside
// acquires (holding a key's lock), releases, inserts, reclaims and compactions, and leave leases
// that nobody releases. The rounds come in epochs: within one the ManualClock stands still
// (leases never expire, so the count of leases held per key, raised after an admission and
// lowered before the release, is exact, dead workers' leases included); each epoch starts by
// moving the clock past leaseMs, so that every lease has expired, every key is idle, and the hot
// keys are reclaimed by sweeps and inserted again while workers acquire them. Checked:
// - never more than maxInFlight leases held on a key, in any epoch;
// - no key with two live copies after each epoch, every live slot holds a key that was used,
//   all under the forced hash, and liveKeys within the capacity;
// - terminations landed inside sweeps, and some key had all its places held at once (the storm
//   goes on, up to MAX_EPOCHS, until it saw both; past EPOCHS, one worker only sweeps until a
//   termination landed in a sweep, and holds wait for the key's other places);
// - after the storm: claims of dead inserters are freed by sweep() once 30 claim timeouts old, a
//   fresh key admits exactly maxInFlight leases, and once every lease has expired sweep() empties
//   the table and every key admits exactly maxInFlight again.
// Only the timing of terminations uses real time; no assertion depends on it.
describe('a lease kill storm with idle keys, sweeps from workers and colliding keys', () => {
  const KEYS = 4;
  const CHURN = 8;
  const MAX = 3;
  const WORKERS = 4;
  const EPOCHS = soakOr(2, 6);
  const MAX_EPOCHS = soakOr(8, 12);
  const ROUNDS_PER_EPOCH = 2;
  const LEASE_MS = 1_000;
  const MAX_LIFE_MS = 15;
  const CLAIMS_EXPIRE_MS = STORM_REUSE_MS + 10;
  const FORCED_HASH = 5;
  const DOING = ['between calls', 'an acquire', 'a held lease', 'a release', 'a probe', 'a sweep'];
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  /** Leases of cost 1 on `key` until one is refused; how many were granted (all kept). */
  const drain = (limiter: ConcurrencyLimiter, key: string): number => {
    let n = 0;
    while (limiter.tryAcquire(key).allowed) n++;
    return n;
  };

  it('never holds more than maxInFlight, stays whole and usable', async () => {
    const clock = new ManualClock(1_000_000);
    const limiter = new ConcurrencyLimiter({ maxInFlight: MAX, leaseMs: LEASE_MS, maxKeys: 8, ...stagedReuse(1, STORM_REUSE_MS), forceHash: FORCED_HASH, clock });
    const random = mulberry32(0x1ea5e);
    const used = new Set([...Array.from({ length: KEYS }, (_, k) => `key${k}`), ...Array.from({ length: CHURN }, (_, i) => `churn-${i}`)]);
    const errors: unknown[] = [];
    const killedIn = DOING.map(() => 0);
    let admissions = 0;
    let mostEver = 0;
    let epoch = 0;
    for (; epoch < EPOCHS || ((killedIn[5] === 0 || mostEver < MAX) && epoch < MAX_EPOCHS); epoch++) {
      if (epoch > 0) clock.advance(2 * LEASE_MS); // every lease expired: every key idle
      const ctl = new Int32Array(new SharedArrayBuffer(4 * (2 * KEYS + 1)));
      // Past the planned epochs (the storm has not shown all of a key's places held at once, or a
      // termination inside a sweep), workers live longer, so that they overlap more: found in CI
      // beside other load, workers living up to 15 ms held at most 2 of 3 places in 8 epochs.
      const lifeMs = epoch < EPOCHS ? MAX_LIFE_MS : Math.min(200, MAX_LIFE_MS * 2 ** (epoch - EPOCHS + 1));
      // And, until a key was seen with all its places held, a worker holding a lease waits (up to
      // 2 ms) for its key's other places to be taken: found in a quiet CI soak run, 12 epochs of
      // short holds never had 3 of 3 held at once (on two cores that needs two workers preempted
      // inside a hold of a few hundred ns).
      const holdMs = epoch >= EPOCHS && mostEver < MAX ? 2 : 0;
      // And, until a termination landed inside a sweep, one worker only sweeps: found beside two
      // CPU-bound loops, 8 epochs of mixed workers (a sweep is one pick in 16) saw none in 64
      // terminations, 1 full run in 10.
      const sweeperId = epoch >= EPOCHS && killedIn[5] === 0 ? 0 : -1;
      for (let round = 0; round < ROUNDS_PER_EPOCH; round++) {
        const doing = new Int32Array(new SharedArrayBuffer(4 * WORKERS));
        const seed = Math.floor(random() * 2 ** 32);
        const pool = Array.from({ length: WORKERS }, (_, id) => new Worker(stormWorker, {
          workerData: {
            handle: limiter.handle, keys: KEYS, churn: CHURN, id, doing: doing.buffer, seed: (seed + id * 0x9e3779b9) | 0, ctl: ctl.buffer, holdMs,
            sweeper: id === sweeperId,
          },
        }));
        await Promise.all(pool.map((w) => new Promise<void>((resolve) => {
          w.once('message', () => resolve());
          w.once('error', (e) => { errors.push(e); resolve(); });
          w.once('exit', () => resolve());
        })));
        await Promise.all(pool.map(async (w, id) => {
          await sleep(random() * lifeMs);
          await w.terminate();
          const where = Atomics.load(doing, id);
          killedIn[where] = (killedIn[where] ?? 0) + 1;
        }));
        expect(errors.map((e) => (e as Error).stack ?? String(e)), `epoch ${epoch}, round ${round}: workers threw`).toEqual([]);
      }
      const most = Array.from(ctl.subarray(KEYS, 2 * KEYS));
      expect(Math.max(...most), `epoch ${epoch}: most leases held per key ${most}`).toBeLessThanOrEqual(MAX);
      mostEver = Math.max(mostEver, ...most);
      admissions += Atomics.load(ctl, 2 * KEYS);
      expect(duplicateKeys(limiter.handle.table), `epoch ${epoch}: keys with two live copies`).toEqual([]);
      expect(limiter.stats().liveKeys).toBeLessThanOrEqual(limiter.stats().capacity);
    }
    const kills = Object.fromEntries(DOING.map((d, i) => [d, killedIn[i]]));
    console.log(`lease kill storm: ${epoch} epochs, admissions ${admissions}, terminated inside ${JSON.stringify(kills)}, casRetries ${limiter.stats().casRetries}, compacted slots now ${compactedSlots(limiter.handle.table)}`);
    expect(admissions).toBeGreaterThan(1_000);
    expect(killedIn[5], 'no termination landed inside a sweep').toBeGreaterThan(0);
    expect(mostEver, 'no key ever had all its places held at once').toBe(MAX);

    // Claims left by inserters that died are freed by sweep() once STORM_REUSE_MS old.
    await sleep(CLAIMS_EXPIRE_MS);
    limiter.sweep();
    expect(limiter.stats().claimed).toBe(0);
    const copies = liveCopies(limiter.handle.table);
    expect([...copies].filter(([, n]) => n > 1)).toEqual([]);
    expect([...copies.keys()].filter((k) => !used.has(k))).toEqual([]);
    // Every live slot holds a key of the forced hash (none may be live: on a busy machine the last
    // epoch's workers may all have been terminated before they held a lease, and sweep() then
    // reclaimed every key).
    expect([...liveHashes(limiter.handle.table)].filter((h) => h !== FORCED_HASH)).toEqual([]);
    expect(limiter.stats().liveKeys).toBe(copies.size);

    // A fresh key admits exactly maxInFlight on the frozen clock.
    expect(drain(limiter, 'fresh-frozen')).toBe(MAX);

    // Once every lease has expired, sweep() reclaims every key.
    clock.advance(2 * LEASE_MS);
    limiter.sweep();
    expect(limiter.stats(), `still live once idle: ${[...liveCopies(limiter.handle.table).keys()].join(', ')}`).toMatchObject({ liveKeys: 0, claimed: 0, placesHeld: 0 });

    // And every key, hot ones included, admits exactly maxInFlight again, and no more.
    const keys = [...Array.from({ length: KEYS }, (_, k) => `key${k}`), 'fresh-1', 'fresh-2'];
    expect(keys.map((key) => drain(limiter, key))).toEqual(keys.map(() => MAX));
  });
});
