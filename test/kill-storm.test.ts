import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter, type RateLimiterOptions } from '../src/index.js';
import { DEAD, H_SLOT_WORDS, HEADER_WORDS, LIVE, S_CTRL, S_KEY_BYTES, S_TAT } from '../src/table/layout.js';
import { keyOffsetOf } from '../src/table/table.js';

// For every configuration of RateLimiter: 20 rounds of four workers that hammer three hot keys,
// insert keys (probes of a shared pool) and sweep, each worker terminated at a random moment of
// real time (a seeded generator picks the moments), so that terminations land inside decisions,
// inserts, reclaims and sweeps, and leave locks and claims behind. The rounds come in 10 epochs of
// 2. Each epoch starts by moving the clock far ahead: every key is then idle, so the hot keys
// are reclaimed by sweeps and inserted again by racing workers while they are being spent.
// Within an epoch the clock stands still (see STEP_MS), so what may pass is exact:
// - the admissions counted in an epoch never exceed any key's limit, nor the global cap;
// - no key ever has two live copies, and every live slot holds a key that was used;
// - liveKeys stays within maxKeys, and claims left by dead inserters are reclaimed by sweep()
//   once they are 30 times claimTimeoutMs old;
// - after the storm a fresh key admits exactly its limit, and once every state is idle, sweep()
//   empties the table and every key (hot ones included) admits exactly its limit again.
//
// The clock is a ManualClock. Between rounds of an epoch it moves by STEP_MS, so that probed
// keys go idle and sweeps reclaim them during the storm; in an epoch that adds up to 0.01 ms,
// far less than any limit's emission interval (0.33 ms at the least, below), and it stays inside
// one window of every window limit (each epoch starts 1 ms into a window of each), so the
// frozen-clock bound holds exactly: the burst for GCRA, `permits` for the windows and the log, and
// the global cap's for all keys together. Only the timing of terminations uses real time; no
// assertion depends on it.

const workerUrl = new URL('./fixtures/storm-worker.mjs', import.meta.url);

const EPOCHS = 10;
const ROUNDS_PER_EPOCH = 2;
const WORKERS = 4;
const HOT = ['hot-0', 'hot-1', 'hot-2'];
/** Keys in the shared pool that workers probe (insert). */
const CHURN = 24;
const MAX_KEYS = 32;
/** A multiple of every period below, plus 1 ms: well inside a window of each. */
const T0 = 360_000_001;
const STEP_MS = 0.005;
/** Longer than every period, and a multiple of each: after it every key's state is a fresh key's. */
const FAR_MS = 600_000;
/** Longest a worker runs before its terminate(), in ms of real time. */
const MAX_LIFE_MS = 15;
/** Claims older than 30 times claimTimeoutMs are reused (src/table/table.ts); stamps are whole ms. */
const CLAIMS_EXPIRE_MS = 30 * 1 + 10;

interface Case {
  name: string;
  options: Omit<RateLimiterOptions, 'maxKeys' | 'claimTimeoutMs' | 'clock' | 'forceHash'>;
  /** The most one key may admit at one instant (in cost units). */
  keyBound: number;
  /** The most all keys together may admit at one instant, with a global cap. */
  globalBound?: number;
}

const win = (permits: number, periodMs = 1_000) => ({ permits, periodMs });

const CASES: Case[] = [
  { name: 'gcra, one limit', options: { limit: perSecond(200) }, keyBound: 200 },
  { name: 'gcra, one limit, 64-bit state', options: { limit: perSecond(3_000, { burst: 300 }) }, keyBound: 300 },
  { name: 'gcra, two limits', options: { limit: [perSecond(200), perMinute(300)] }, keyBound: 200 },
  { name: 'gcra with a global cap', options: { limit: perSecond(100), globalLimit: perSecond(250) }, keyBound: 100, globalBound: 250 },
  { name: 'fixed window, one limit', options: { algorithm: 'fixed-window', limit: win(200) }, keyBound: 200 },
  { name: 'fixed window, two limits', options: { algorithm: 'fixed-window', limit: [win(150), win(250, 60_000)] }, keyBound: 150 },
  { name: 'sliding window', options: { algorithm: 'sliding-window', limit: win(200) }, keyBound: 200 },
  { name: 'sliding log', options: { algorithm: 'sliding-log', limit: win(200), maxLogSize: 256 }, keyBound: 200 },
  {
    name: 'sliding log with a global cap',
    options: { algorithm: 'sliding-log', limit: win(100), globalLimit: win(250), maxLogSize: 256 },
    keyBound: 100,
    globalBound: 250,
  },
];

/** A small seeded generator (mulberry32): the same seed gives the same terminate moments. */
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Live slots (LIVE and not being reclaimed) per key, read straight from the table. */
function liveCopies(limiter: RateLimiter): Map<string, number> {
  const w = new Int32Array(limiter.handle.table);
  const bytes = new Uint8Array(limiter.handle.table);
  const slotWords = w[H_SLOT_WORDS] as number;
  const { capacity } = limiter.stats();
  const copies = new Map<string, number>();
  for (let slot = 0; slot < capacity; slot++) {
    const base = HEADER_WORDS + slot * slotWords;
    if (((w[base + S_CTRL] as number) & 3) !== LIVE || w[base + S_TAT] === DEAD) continue;
    const start = (base + keyOffsetOf(w)) * 4;
    const key = new TextDecoder().decode(bytes.slice(start, start + (w[base + S_KEY_BYTES] as number)));
    copies.set(key, (copies.get(key) ?? 0) + 1);
  }
  return copies;
}

/** Admits cost-1 requests on `key` until one is refused; returns how many passed. */
function drain(limiter: RateLimiter, key: string): number {
  let n = 0;
  while (limiter.allow(key)) n++;
  return n;
}

/** Starts the round's workers and waits until all of them run their loop. */
async function startRound(limiter: RateLimiter, counters: SharedArrayBuffer, seed: number, errors: unknown[]): Promise<Worker[]> {
  const gate = new SharedArrayBuffer(8);
  const pool = Array.from({ length: WORKERS }, (_, id) => new Worker(workerUrl, {
    workerData: { handle: limiter.handle, id, hot: HOT, churn: CHURN, gate, counters, seed: (seed + id * 0x9e3779b9) | 0 },
  }));
  const started = pool.map((w) => new Promise<void>((resolve) => {
    w.once('message', () => resolve());
    w.once('error', (e) => { errors.push(e); resolve(); });
    w.once('exit', () => resolve());
  }));
  const g = new Int32Array(gate);
  const deadline = performance.now() + 20_000;
  while (Atomics.load(g, 0) < WORKERS && errors.length === 0 && performance.now() < deadline) await sleep(1);
  Atomics.store(g, 1, 1);
  Atomics.notify(g, 1);
  await Promise.all(started);
  return pool;
}

describe('workers terminated at random moments, 20 rounds, every configuration', () => {
  it.each(CASES)('$name: stays exact, whole and usable', async (c) => {
    const clock = new ManualClock(T0);
    // claimTimeoutMs 1, the least allowed, so that locks and claims left by terminated workers are
    // taken over during the storm; every key hashes alike, so that all of them share one probe
    // chain and inserts of different keys meet each other's claims.
    const limiter = new RateLimiter({ ...c.options, maxKeys: MAX_KEYS, claimTimeoutMs: 1, clock, forceHash: 7 });
    const random = generator([...c.name].reduce((h, ch) => Math.imul(h ^ ch.charCodeAt(0), 0x01000193), 0x811c9dc5));
    const errors: unknown[] = [];
    const used = new Set([...HOT, ...Array.from({ length: CHURN }, (_, i) => `churn-${i}`)]);
    let work = 0;
    let count: Int32Array = new Int32Array(0);

    for (let epoch = 0; epoch < EPOCHS; epoch++) {
      if (epoch > 0) clock.advance(FAR_MS); // every key idle: hot keys get reclaimed and inserted again
      const counters = new SharedArrayBuffer(4 * (HOT.length + WORKERS));
      count = new Int32Array(counters);
      for (let round = 0; round < ROUNDS_PER_EPOCH; round++) {
        const pool = await startRound(limiter, counters, Math.floor(random() * 2 ** 32), errors);
        await Promise.all(pool.map(async (w) => {
          await sleep(random() * MAX_LIFE_MS);
          await w.terminate();
        }));
        expect(errors).toEqual([]);
        expect(limiter.stats().liveKeys).toBeLessThanOrEqual(MAX_KEYS);
        clock.advance(STEP_MS);
      }
      // Never more than the limit while the clock stood still, whatever was terminated where.
      const admitted = HOT.map((_, k) => count[k] as number);
      expect(admitted.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
      for (const n of admitted) expect(n, `epoch ${epoch}: admitted ${admitted.join(', ')}`).toBeLessThanOrEqual(c.keyBound);
      if (c.globalBound !== undefined) expect(admitted.reduce((a, b) => a + b, 0), `epoch ${epoch}`).toBeLessThanOrEqual(c.globalBound);
      expect([...liveCopies(limiter)].filter(([, n]) => n > 1), `epoch ${epoch}: keys with two live copies`).toEqual([]);
      work += Array.from({ length: WORKERS }, (_, id) => count[HOT.length + id] as number).reduce((a, b) => a + b, 0);
    }
    expect(work).toBeGreaterThan(1_000); // the workers did run between their starts and their ends

    // The main thread, admitting on until refused, cannot go past the last epoch's limit either.
    const more = HOT.map((key) => drain(limiter, key));
    const perKey = HOT.map((_, k) => (count[k] as number) + (more[k] as number));
    for (const total of perKey) expect(total).toBeLessThanOrEqual(c.keyBound);
    if (c.globalBound !== undefined) expect(perKey.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(c.globalBound);

    // Claims left by inserters that died are reclaimed by sweep() once 30 claim timeouts old.
    await sleep(CLAIMS_EXPIRE_MS);
    limiter.sweep();
    expect(limiter.stats().claimed).toBe(0);

    // No key has two live copies, and every live key is one the workers used.
    const copies = liveCopies(limiter);
    expect([...copies].filter(([, n]) => n > 1)).toEqual([]);
    expect([...copies.keys()].filter((k) => !used.has(k))).toEqual([]);
    const { liveKeys } = limiter.stats();
    expect(liveKeys).toBe(copies.size);
    expect(liveKeys).toBeLessThanOrEqual(MAX_KEYS);

    // A fresh key still admits exactly its limit on the frozen clock (with a global cap, the cap
    // may be spent by now: checked below, once time has passed).
    if (c.globalBound === undefined) expect(drain(limiter, 'fresh-frozen')).toBe(c.keyBound);

    // Once every state is idle, sweep() reclaims every key: nothing stays held.
    clock.advance(FAR_MS);
    limiter.sweep();
    expect(limiter.stats(), `still live once idle: ${[...liveCopies(limiter).keys()].join(', ')}`).toMatchObject({ liveKeys: 0, claimed: 0 });

    // And every key, hot ones included, admits exactly its limit again (a global cap: exactly the
    // cap over all of them, none more than its own limit).
    const keys = [...HOT, 'fresh-1', 'fresh-2'];
    const after = keys.map((key) => drain(limiter, key));
    if (c.globalBound === undefined) {
      expect(after).toEqual(keys.map(() => c.keyBound));
    } else {
      expect(after[0]).toBe(c.keyBound);
      for (const n of after) expect(n).toBeLessThanOrEqual(c.keyBound);
      expect(after.reduce((a, b) => a + b, 0)).toBe(c.globalBound);
    }
    for (const key of keys) expect(limiter.allow(key)).toBe(false);
  });
});
