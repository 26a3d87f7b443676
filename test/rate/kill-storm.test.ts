import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter, type Limit, type RateLimiterOptions } from '../../src/index.js';
import { DEAD, H_SLOT_WORDS, HEADER_WORDS, LIVE, S_CTRL, S_KEY_BYTES, S_TAT } from '../../src/table/layout.js';
import { keyOffsetOf } from '../../src/table/table-buffer.js';
import { replayFixedWindow, replaySlidingWindow, type Admission, type ModelReport } from '../helpers/model.js';
import { mulberry32 } from '../helpers/random.js';
import { fastCases, SOAK, soakOr } from '../helpers/soak.js';
import { stagedReuse, STORM_REUSE_MS } from '../helpers/park.js';

// For every configuration of RateLimiter: rounds of four workers that hammer three hot keys,
// insert keys (probes of a shared pool) and sweep, each worker terminated at a random moment of
// real time (a seeded generator picks the moments), so that terminations land inside decisions,
// inserts, reclaims and sweeps, and leave locks and claims behind. npm run test:soak runs every
// configuration for 10 epochs of 2 rounds; npm test runs seven of them (FAST, FAST_CONTROLS,
// FAST_RESERVE) for 2 epochs of 1 round. Each epoch starts by moving the clock far ahead: every
// key is then idle, so the hot keys are reclaimed by sweeps and inserted again by racing workers
// while they are being spent.
// Within an epoch the clock stands still (see STEP_MS), so what may pass is exact:
// - the admissions counted in an epoch never exceed any key's limit, nor the global cap, nor do
//   they with what the key still has free at the epoch's end;
// - no key ever has two live copies, and every live slot holds a key that was used;
// - liveKeys stays within maxKeys, and claims left by dead inserters are reclaimed by sweep()
//   once they are the table's reuseAfterMs old (STORM_REUSE_MS here);
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

const workerUrl = new URL('../fixtures/storm-worker.mjs', import.meta.url);

const EPOCHS = 10;
const ROUNDS_PER_EPOCH = soakOr(1, 2);
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
/** Claims older than STORM_REUSE_MS are reused; stamps are whole ms. */
const CLAIMS_EXPIRE_MS = STORM_REUSE_MS + 10;

interface Case {
  name: string;
  options: Omit<RateLimiterOptions, 'maxKeys' | 'claimTimeoutMs' | 'clock' | 'forceHash'>;
  /** The most one key may admit at one instant (in cost units). */
  keyBound: number;
  /** The most all keys together may admit at one instant, with a global cap. */
  globalBound?: number;
  /** The hot keys also take window reservations, some of them cancelled (see RESERVE_CASES). */
  reserve?: true;
  /** The workers also penalize, block, reward and reset the hot keys; 'no-block': all but block (windows, logs). See CONTROL_CASES. */
  controls?: true | 'no-block';
  /** Epochs to run (EPOCHS unless set). */
  epochs?: number;
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
  // A dense table: 40 slots for 27 keys that all collide, so tombstones and claims crowd the
  // one probe chain (slotsPerKey 1.25 takes the long stripes of 80% full tables).
  { name: 'gcra, one limit, slotsPerKey 1.25', options: { limit: perSecond(200), slotsPerKey: 1.25 }, keyBound: 200, epochs: 4 },
  {
    name: 'sliding log, slotsPerKey 1.25',
    options: { algorithm: 'sliding-log', limit: win(200), maxLogSize: 256, slotsPerKey: 1.25 }, keyBound: 200, epochs: 4,
  },
];

// The same storm with window reservations: on the hot keys, half the attempts reserve (waiting as
// long as it takes, or not at all), and some reservations that act later are cancelled before
// they act. On a frozen clock a window counts a reservation in the clock's window while it has
// room and in the next one after that (never further), and nothing acts now on the next window's
// count. So every act is logged (an admission at the clock's reading, a reservation at the time
// it acts, a cancelled one not at all) and each epoch's log is replayed against an exact model of
// each window (helpers/model.ts): in every window of every limit, the admissions plus the
// reservations that act in it stay within permits, and for the sliding window its estimate at
// every act (the clock's window weighing on the next) stays within permits. A cancel before the
// act time always gives the place back here: the state holds the reserved window until the clock
// moves. After the storm, every key takes exactly the reservations a fresh limiter gives.
// Fewer epochs than above: the added cases keep the suite's time modest.
const RESERVE_CASES: Case[] = [
  { name: 'fixed window, one limit', options: { algorithm: 'fixed-window', limit: win(200) }, keyBound: 200, reserve: true, epochs: 4 },
  {
    name: 'fixed window, two limits',
    // The minute window holds both second windows the reservations act in: 250 of 2 * 150.
    options: { algorithm: 'fixed-window', limit: [win(150), win(250, 60_000)] }, keyBound: 150, reserve: true, epochs: 4,
  },
  {
    name: 'fixed window with a global cap',
    options: { algorithm: 'fixed-window', limit: win(100), globalLimit: win(250) }, keyBound: 100, globalBound: 250, reserve: true, epochs: 4,
  },
  { name: 'sliding window', options: { algorithm: 'sliding-window', limit: win(200) }, keyBound: 200, reserve: true, epochs: 4 },
];

// The same storm with per-key controls (penalty, block, reward, reset): an eighth of the hot-key
// attempts is a control instead. On the frozen clock a penalty and a block only spend, so what a
// key admits in an epoch is at most its burst plus what rewards gave back, and plus a burst for
// each reset. Each worker adds what a reward or reset may give back to the key's bound before the
// call, so the bound holds also for a worker terminated inside one. Several limits: the smallest
// burst binds; under a cap, the cap's bound holds as well (nothing gives back the cap). A worker
// terminated while it holds a key's give-back guard (a reward, a reset, an undo) leaves it to be
// taken over at the table's reuse age (STORM_REUSE_MS). The windows and the log have no block: a
// penalty takes its turn there.
const CONTROL_CASES: Case[] = [
  { name: 'gcra, one limit, with per-key controls', options: { limit: perSecond(200) }, keyBound: 200, controls: true, epochs: 4 },
  { name: 'gcra, 64-bit state, with per-key controls', options: { limit: perSecond(3_000, { burst: 300 }) }, keyBound: 300, controls: true, epochs: 4 },
  {
    name: 'two gcra limits, with per-key controls', options: { limit: [perSecond(200), perMinute(12_000, { burst: 300 })] },
    keyBound: 200, controls: true, epochs: 4,
  },
  {
    // A cap above the keys' bounds together, so that each key's own bound is what binds.
    name: 'gcra under a global cap, with per-key controls', options: { limit: perSecond(200), globalLimit: perSecond(1_000) },
    keyBound: 200, globalBound: 1_000, controls: true, epochs: 4,
  },
  {
    name: 'fixed window, two limits, with per-key controls (no block)', options: { algorithm: 'fixed-window', limit: [win(150), win(250, 60_000)] },
    keyBound: 150, controls: 'no-block', epochs: 4,
  },
  { name: 'sliding window, with per-key controls (no block)', options: { algorithm: 'sliding-window', limit: win(200) }, keyBound: 200, controls: 'no-block', epochs: 4 },
  {
    name: 'sliding log, with per-key controls (no block)', options: { algorithm: 'sliding-log', limit: win(200), maxLogSize: 256 },
    keyBound: 200, controls: 'no-block', epochs: 4,
  },
];

/** Room in the log for every act of one epoch (admissions and reservations, cancelled or not). */
const LOG_ENTRIES = 1 << 16;

/** One epoch's log of acts (see test/fixtures/storm-worker.mjs). */
interface ActLog {
  meta: SharedArrayBuffer;
  at: SharedArrayBuffer;
  stats: SharedArrayBuffer;
}

function newLog(): ActLog {
  return {
    meta: new SharedArrayBuffer(4 * (1 + 2 * LOG_ENTRIES)),
    at: new SharedArrayBuffer(8 * LOG_ENTRIES),
    stats: new SharedArrayBuffer(4 * 4),
  };
}

/** Marks a reservation's key word in the log (the rest is the hot key's index). */
const RESERVED = 1 << 8;

/** The acts in `log` (cancelled and unfinished entries left out), with the key index of each. */
function actsOf(log: ActLog): Admission[] {
  const meta = new Int32Array(log.meta);
  const at = new Float64Array(log.at);
  const n = meta[0] as number;
  expect(n, 'the log overflowed').toBeLessThanOrEqual(LOG_ENTRIES);
  const acts: Admission[] = [];
  for (let i = 0; i < n; i++) {
    const cost = meta[2 + 2 * i] as number;
    const k = meta[1 + 2 * i] as number;
    const t = at[i] as number;
    if (cost > 0) acts.push({ t, first: t, cost, key: k & ~RESERVED, reserved: (k & RESERVED) !== 0 });
  }
  return acts;
}

/** Replays `acts` against one window limit; null when the model finds nothing wrong. */
function windowViolations(algorithm: string, acts: Admission[], limit: Required<Limit>): ModelReport | null {
  const r = algorithm === 'fixed-window' ? replayFixedWindow(acts, limit) : replaySlidingWindow(acts, limit);
  return r.violations > 0 ? r : null;
}

/** The delays of reservations of cost 1 on `keys` in turn, each until refused (a name for each refusal). */
function reserveAll(limiter: RateLimiter, keys: string[]): (number | string)[] {
  const got: (number | string)[] = [];
  for (const key of keys) {
    for (;;) {
      try {
        got.push(limiter.reserve(key).delayMs);
      } catch (e) {
        got.push(`${key}: ${(e as Error).name}`);
        break;
      }
    }
  }
  return got;
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
async function startRound(
  limiter: RateLimiter, counters: SharedArrayBuffer, seed: number, errors: unknown[], log?: ActLog, controls?: { keyBound: number; noBlock: boolean },
): Promise<Worker[]> {
  const gate = new SharedArrayBuffer(8);
  const pool = Array.from({ length: WORKERS }, (_, id) => new Worker(workerUrl, {
    workerData: { handle: limiter.handle, id, hot: HOT, churn: CHURN, gate, counters, seed: (seed + id * 0x9e3779b9) | 0, log, controls },
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

/** One storm for `c`, and every check on it (see the top of this file, and RESERVE_CASES). */
async function storm(c: Case): Promise<void> {
  const clock = new ManualClock(T0);
  // claimTimeoutMs 1, the least allowed, so that locks and claims left by terminated workers are
  // taken over during the storm; every key hashes alike, so that all of them share one probe
  // chain and inserts of different keys meet each other's claims.
  const limiter = new RateLimiter({ ...c.options, maxKeys: MAX_KEYS, ...stagedReuse(1, STORM_REUSE_MS), clock, forceHash: 7 });
  const seedName = c.reserve ? `${c.name} with reservations` : c.name;
  const random = mulberry32([...seedName].reduce((h, ch) => Math.imul(h ^ ch.charCodeAt(0), 0x01000193), 0x811c9dc5));
  const errors: unknown[] = [];
  const used = new Set([...HOT, ...Array.from({ length: CHURN }, (_, i) => `churn-${i}`)]);
  let work = 0;
  let count: Int32Array = new Int32Array(0);
  // Reservations: made for a later window, cancelled, and races lost, over all epochs.
  const reserved = { ahead: 0, cancelled: 0, casRetries: 0 };

  let epochsWithAdmissions = 0;
  /** Epochs whose workers ran: 20 iterations at least (9 in 16 go to a hot key, which admits at once in a fresh epoch). */
  let epochsThatRan = 0;
  // Epochs go on (up to 4x) until the workers did run (1,000 attempts) and, with reservations,
  // until the storm showed reservations made ahead, cancelled and raced: a busy machine runs
  // fewer attempts per round, and never fails the test for it.
  const epochs = c.epochs ?? EPOCHS;
  // With controls: what rewards and resets may have given back, and the controls that returned,
  // over all epochs.
  let givenBackBound = 0;
  let controlsMade = 0;
  const shown = () => work > 1_000 && (!c.reserve || (reserved.ahead > 0 && reserved.cancelled > 0 && reserved.casRetries > 0)) &&
    (!c.controls || (controlsMade > 0 && givenBackBound > 0));
  let epoch = 0;
  for (; epoch < epochs || (!shown() && epoch < 4 * epochs); epoch++) {
    if (epoch > 0) clock.advance(FAR_MS); // every key idle: hot keys get reclaimed and inserted again
    // With controls, one more word per hot key (what rewards and resets may have given back) and
    // one for the controls that returned.
    const counters = new SharedArrayBuffer(4 * (HOT.length + WORKERS + (c.controls ? HOT.length + 1 : 0)));
    count = new Int32Array(counters);
    const log = c.reserve ? newLog() : undefined;
    // An epoch past the planned ones, run because the storm has not shown what it must yet: its
    // workers first make enough attempts to fill the hot keys' windows (found: on a busy machine,
    // workers that lived up to 15 ms made too few to reserve ahead in 16 epochs) and to bring the
    // storm's work past 1,000 attempts (found in CI beside another full test run: 995 after 4x
    // the planned epochs of a sliding log with a cap), then live their random time.
    const fill = epoch >= epochs ? Math.max(c.reserve ? HOT.length * 2 * (c.keyBound + 50) : 0, 1_001 - work) : 0;
    for (let round = 0; round < ROUNDS_PER_EPOCH; round++) {
      const controls = c.controls ? { keyBound: c.keyBound, noBlock: c.controls === 'no-block' } : undefined;
      const pool = await startRound(limiter, counters, Math.floor(random() * 2 ** 32), errors, log, controls);
      const attempts = () => Array.from({ length: WORKERS }, (_, id) => Atomics.load(count, HOT.length + id)).reduce((a, b) => a + b, 0);
      const fillBy = performance.now() + 5_000;
      while (round === 0 && attempts() < fill && performance.now() < fillBy) await sleep(1);
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
    // An epoch whose workers were all terminated before their first decision (a loaded machine
    // starts them late) admits nothing: liveness is asked of the storm, not of every epoch.
    if (admitted.reduce((a, b) => a + b, 0) > 0) epochsWithAdmissions++;
    if (Array.from({ length: WORKERS }, (_, id) => count[HOT.length + id] as number).reduce((a, b) => a + b, 0) >= 20) epochsThatRan++;
    const bounds = HOT.map((_, k) => c.keyBound + (c.controls ? count[HOT.length + WORKERS + k] as number : 0));
    admitted.forEach((n, k) => expect(n, `epoch ${epoch}: admitted ${admitted.join(', ')}, bounds ${bounds.join(', ')}`).toBeLessThanOrEqual(bounds[k] as number));
    // And what each key still has free on the frozen clock (read, not spent) adds to no more:
    // the drain below, after every epoch (found so: a reset taken over mid-write reset a log twice,
    // test/algorithms/sliding-log-reset-takeover.test.ts). A key the table no longer holds is fresh.
    const free = HOT.map((key) => limiter.get(key)?.remaining ?? c.keyBound);
    const seen = `epoch ${epoch}: admitted ${admitted.join(', ')}, still free ${free.join(', ')}, bounds ${bounds.join(', ')}`;
    admitted.forEach((n, k) => expect(n + (free[k] as number), seen).toBeLessThanOrEqual(bounds[k] as number));
    if (c.globalBound !== undefined) expect(admitted.reduce((a, b) => a + b, 0), `epoch ${epoch}`).toBeLessThanOrEqual(c.globalBound);
    expect([...liveCopies(limiter)].filter(([, n]) => n > 1), `epoch ${epoch}: keys with two live copies`).toEqual([]);
    work += Array.from({ length: WORKERS }, (_, id) => count[HOT.length + id] as number).reduce((a, b) => a + b, 0);
    if (c.controls) {
      givenBackBound += bounds.reduce((a, b) => a + b, 0) - HOT.length * c.keyBound;
      controlsMade += count[count.length - 1] as number;
    }
    if (log !== undefined) {
      // Every window of every limit, per key and for the cap over all keys, held no more than
      // its promise: the admissions and the reservations that act in it (cancelled ones left
      // out; a sliding window's estimate at every act).
      const acts = actsOf(log);
      const found: object[] = [];
      HOT.forEach((key, k) => {
        const mine = acts.filter((a) => a.key === k);
        limiter.limits.forEach((limit, i) => {
          const r = windowViolations(limiter.algorithm, mine, limit);
          if (r !== null) found.push({ key, limit: i, ...r });
        });
      });
      const cap = limiter.globalLimit === null ? null : windowViolations(limiter.algorithm, acts, limiter.globalLimit);
      if (cap !== null) found.push({ key: 'global cap', ...cap });
      expect(found, `epoch ${epoch}`).toEqual([]);
      const stats = new Int32Array(log.stats);
      // The clock stood still: every state still held the window its reservations were
      // counted in, so every cancel before the act time gave the place back.
      expect(stats[2], `epoch ${epoch}: cancels refused`).toBe(0);
      reserved.ahead += stats[0] as number;
      reserved.cancelled += stats[1] as number;
      reserved.casRetries += stats[3] as number;
    }
  }
  expect(work).toBeGreaterThan(1_000); // the workers did run between their starts and their ends
  if (c.controls) expect(controlsMade, 'controls that returned').toBeGreaterThan(0);
  if (c.controls) expect(givenBackBound, 'rewards and resets were made').toBeGreaterThan(0);
  // Of the epochs whose workers ran (both planned epochs of a busy machine's run may start their
  // workers too late to decide anything; the extra epoch that then fills them would be 1 of 3).
  expect(epochsWithAdmissions * 2, `epochs that admitted something, of ${epochsThatRan} that ran`).toBeGreaterThanOrEqual(epochsThatRan);
  if (c.reserve) {
    // Reservations for the next window were made and cancelled, and the workers raced.
    expect(reserved.ahead, JSON.stringify(reserved)).toBeGreaterThan(0);
    expect(reserved.cancelled, JSON.stringify(reserved)).toBeGreaterThan(0);
    expect(reserved.casRetries, JSON.stringify(reserved)).toBeGreaterThan(0);
  }

  // The main thread, admitting on until refused, cannot go past the last epoch's limit either.
  const more = HOT.map((key) => drain(limiter, key));
  const perKey = HOT.map((_, k) => (count[k] as number) + (more[k] as number));
  perKey.forEach((total, k) => expect(total).toBeLessThanOrEqual(c.keyBound + (c.controls ? count[HOT.length + WORKERS + k] as number : 0)));
  if (c.globalBound !== undefined) expect(perKey.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(c.globalBound);

  // Claims left by inserters that died are reclaimed by sweep() once STORM_REUSE_MS old, and so
  // are the keys whose lock a dead worker held (below).
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

  if (c.reserve) {
    // Reservations too, once idle again: every key takes exactly the places (this window's,
    // then the next's) that a fresh limiter gives, in the same order, and no more.
    clock.advance(FAR_MS);
    limiter.sweep();
    const fresh = new RateLimiter({ ...c.options, maxKeys: MAX_KEYS, clock: new ManualClock(clock.now()) });
    expect(reserveAll(limiter, keys)).toEqual(reserveAll(fresh, keys));
  }
}

// npm test: three configurations, two epochs of one round each (and three of the controls' and
// one of the reservations'); npm run test:soak: every one, at full length.
const FAST = ['gcra, one limit', 'sliding log with a global cap', 'gcra, one limit, slotsPerKey 1.25'];
const FAST_CONTROLS = ['two gcra limits, with per-key controls', 'fixed window, two limits, with per-key controls (no block)', 'sliding log, with per-key controls (no block)'];
const FAST_RESERVE = ['fixed window with a global cap'];
const fast = (c: Case): Case => (SOAK ? c : { ...c, epochs: 2 });

describe('workers terminated at random moments, every configuration', () => {
  it.each(fastCases(CASES, FAST).map(fast))('$name: stays exact, whole and usable', storm);
});

describe('workers terminated at random moments while they penalize, block, reward and reset keys', () => {
  it.each(fastCases(CONTROL_CASES, FAST_CONTROLS).map(fast))('$name: each key within its bound, whole and usable', storm);
});

describe('workers terminated at random moments while they reserve and cancel, window configurations', () => {
  it.each(fastCases(RESERVE_CASES, FAST_RESERVE).map(fast))('$name: every window within its permits, whole and usable', storm);
});
