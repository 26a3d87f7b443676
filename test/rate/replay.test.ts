import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { coarseClock, perSecond, RateLimiter, type Limit, type RateLimiterOptions } from '../../src/index.js';
import { gcraParams } from '../../src/math/gcra.js';
import {
  busiestSpan, byLastReading, replayFixedWindow, replayGcra, replaySlidingLog, replaySlidingWindow, type Admission, type ModelReport,
} from '../helpers/model.js';
import { fastCases } from '../helpers/soak.js';

// Four workers hammer one hot key (and two warmer ones) of one limiter on the real clock for
// 400 ms, each through a clock that remembers what the limiter read during every call. Every
// admission comes back with its key, its cost and its readings; the main thread then replays all
// of them, in order of reading, against an exact model of each limit (helpers/model.ts) and
// expects not one admission the model refuses. A global cap is replayed over all keys together.
//
// Which reading was a request judged at? Nearly every call reads the clock once. A call can read
// it more often (a new key's fresh state, a commit that lost a race re-reading the clock to see
// how old its reading has grown, a global cap's own reading), and then it was judged at a reading
// between its first and its last. The models account for exactly that and nothing more (see
// helpers/model.ts): treating such a call as judged at its last reading alone blames it for time
// that passed while it retried (seen: a call whose readings spanned 145 us looked 0.145 ms early
// to a GCRA model with a 1 ms interval, although it conformed at its first reading).
//
// Tolerances: GCRA one tick of the limit and no more (10 ns for the 32-bit limits here, 0.1 ps
// for the 64-bit one), because the limiter floors each reading to a whole tick; its emission
// interval rounds up, which only ever refuses more. The tolerance is added to tau for each check
// and does not add up over the run. Fixed windows and the sliding log: none at all. The sliding
// window is an estimate: it is replayed against the exact two-window model (its estimate at every
// act within permits, up to float rounding far below one request), and its documented promise,
// "never twice permits in any period", is checked too.
//
// Window reservations: on the cases with `reserve`, some attempts call reserve() instead (waiting
// up to the next window, or not at all), and some reservations that act later are cancelled a few
// attempts on. A reservation is replayed at the time it acts (actAtMs, exact: the reading it was
// judged at plus its delay), one without delay as an admission at that reading; one whose cancel()
// succeeded is left out, one whose cancel() failed stays in.

const workerUrl = new URL('../fixtures/replay-worker.mjs', import.meta.url);

const WORKERS = 4;
const RUN_MS = 400;
/** Key 0 is the hot key: half of all attempts; the other two share the rest. */
const KEYS = ['hot', 'warm-1', 'warm-2'];
const HOT_SHARE = 0.5;
/** Costs drawn for each attempt. */
const COSTS = [1, 1, 1, 2];
/** Room for every admission a worker can make in one run with the limits below. */
const CAPACITY = 100_000;
/**
 * Runs of a case at most, each twice as long as the one before, until what they showed together
 * covers the whole attack (see the test): 400 ms to 12.8 s, 25.2 s in all.
 */
const MAX_RUNS = 6;

interface Case {
  name: string;
  options: Omit<RateLimiterOptions, 'maxKeys' | 'claimTimeoutMs'>;
  /** Start every worker at this point of a window. */
  startPhase?: { periodMs: number; fraction: number };
  /** Window reservations (see above): the share of attempts that reserve, their maxWaitMs choices, the share of later ones cancelled. */
  reserve?: { share: number; maxWaitMs: number[]; cancelShare: number };
  /** Run on coarseClock(): every worker reads the shared word, whose readings lag real time. */
  coarse?: boolean;
}

/** Reservations in the window cases that take them: up to the next window, or none at all. */
const RESERVE = { share: 0.5, maxWaitMs: [0, 1_000], cancelShare: 0.25 };

/** The cases of `npm test` (npm run test:soak runs them all). */
const FAST = ['gcra, one limit', 'gcra with a fast global cap (per-thread batches)', 'gcra, two limits, coarse clock', 'two fixed windows + cap, reservations', 'sliding window', 'sliding log with a global cap'];

const CASES: Case[] = [
  { name: 'gcra, one limit', options: { limit: perSecond(5_000, { burst: 50 }) } },
  // An interval of 333.33 us is not a whole number of any 32-bit tick: the 64-bit GCRA state.
  { name: 'gcra, one limit, 64-bit state', options: { limit: perSecond(3_000, { burst: 30 }) } },
  // A short-term limit that binds first, and a slower one that binds once its burst is spent.
  { name: 'gcra, two limits', options: { limit: [perSecond(4_000, { burst: 20 }), perSecond(2_000, { burst: 200 })] } },
  // Three keys at up to 2,500/s each against a cap of 4,000/s: the cap binds.
  { name: 'gcra with a global cap', options: { limit: perSecond(2_500, { burst: 25 }), globalLimit: perSecond(4_000, { burst: 40 }) } },
  // The same with a key limit whose interval (333.33 us) needs the 64-bit GCRA state, under a
  // cap that fits 32 bits.
  {
    name: 'gcra with a global cap, 64-bit key state',
    options: { limit: perSecond(3_000, { burst: 30 }), globalLimit: perSecond(4_000, { burst: 40 }) },
  },
  // A cap fast enough to be served to allow() in per-thread batches (16 permits held up to 64 us).
  {
    name: 'gcra with a fast global cap (per-thread batches)',
    options: { limit: perSecond(200_000, { burst: 1_000 }), globalLimit: perSecond(250_000, { burst: 512 }) },
  },
  // The coarse clock: readings of one shared word (0.05 ms steps here, so that the hot key's
  // admissions spread over many readings), older than other threads' readings at times.
  // One limit on the coarse clock: many admissions per reading and per second, each thread
  // starting from its own last write of the hot key (Gcra32, "A thread's own write").
  { name: 'gcra, one limit, coarse clock', options: { limit: perSecond(5_000, { burst: 50 }) }, coarse: true },
  { name: 'gcra, two limits, coarse clock', options: { limit: [perSecond(4_000, { burst: 20 }), perSecond(2_000, { burst: 200 })] }, coarse: true },
  { name: 'gcra with a global cap, coarse clock', options: { limit: perSecond(2_500, { burst: 25 }), globalLimit: perSecond(4_000, { burst: 40 }) }, coarse: true },
  { name: 'fixed window, one limit', options: { algorithm: 'fixed-window', limit: { permits: 100, periodMs: 50 } } },
  { name: 'fixed window, two limits', options: { algorithm: 'fixed-window', limit: [{ permits: 40, periodMs: 20 }, { permits: 150, periodMs: 100 }] } },
  {
    // The documented worst case: a burst near the end of one window (workers start 80% into a
    // 100 ms window), then trying on.
    name: 'sliding window',
    options: { algorithm: 'sliding-window', limit: { permits: 100, periodMs: 100 } },
    startPhase: { periodMs: 100, fraction: 0.8 },
  },
  // Reservations spread the spends (each window's places go one at a time, ahead of it), so these
  // limits are ten times wider than above: spends still race for the words.
  { name: 'fixed window, reservations', options: { algorithm: 'fixed-window', limit: { permits: 1_000, periodMs: 50 } }, reserve: RESERVE },
  {
    // One act time for two key limits and the cap: a window that would count the reservation
    // earlier than another limit's wait decides again from that wait.
    name: 'two fixed windows + cap, reservations',
    options: { algorithm: 'fixed-window', limit: [{ permits: 400, periodMs: 20 }, { permits: 1_500, periodMs: 100 }], globalLimit: { permits: 2_000, periodMs: 50 } },
    reserve: RESERVE,
  },
  {
    name: 'sliding window, reservations',
    options: { algorithm: 'sliding-window', limit: { permits: 1_000, periodMs: 100 } },
    startPhase: { periodMs: 100, fraction: 0.8 },
    reserve: RESERVE,
  },
  { name: 'sliding log', options: { algorithm: 'sliding-log', limit: { permits: 200, periodMs: 50 }, maxLogSize: 256 } },
  {
    name: 'sliding log with a global cap',
    options: { algorithm: 'sliding-log', limit: { permits: 100, periodMs: 50 }, globalLimit: { permits: 200, periodMs: 50 }, maxLogSize: 256 },
  },
];

interface Reply {
  n: number;
  lost: number;
  overlaps: number;
  keyOf: Uint8Array;
  costOf: Uint8Array;
  lastAt: Float64Array;
  firstAt: Float64Array;
  readsOf: Uint16Array;
  /** 0 admitted, 1 a reservation acting at its reading, 2 one acting later, 3 one cancelled. */
  kindOf: Uint8Array;
  /** A reservation's actAtMs. */
  actAt: Float64Array;
  reservations: { made: number; later: number; refused: number; cancelled: number; cancelRefused: number };
  refused: Float64Array;
  attempts: Float64Array;
  casRetries: number;
}

type Row = Admission & { reads: number; worker: number; kind: number };

const KIND_NOW = 1;
const KIND_LATER = 2;
const KIND_CANCELLED = 3;

/** Runs the workers against a new limiter for `c` for `runMs`; returns their replies and every admission. */
async function run(c: Case, runMs: number): Promise<{ limiter: RateLimiter; replies: Reply[]; admissions: Row[] }> {
  // claimTimeoutMs 1, the least allowed: locks and claims of a thread that stalls for a
  // millisecond are taken over, so takeovers happen all the time on a busy machine.
  const limiter = new RateLimiter({ ...c.options, maxKeys: 16, claimTimeoutMs: 1, ...(c.coarse === true ? { clock: coarseClock(0.05) } : {}) });
  const gate = new SharedArrayBuffer(8);
  const inside = new SharedArrayBuffer(4);
  const pool = Array.from({ length: WORKERS }, (_, id) => new Worker(workerUrl, {
    workerData: {
      handle: limiter.handle, id, keys: KEYS, hotShare: HOT_SHARE, costs: COSTS, durationMs: runMs, gate, inside,
      capacity: CAPACITY * Math.ceil(runMs / RUN_MS), seed: 0x5eed + id, startPhase: c.startPhase ?? null, reserve: c.reserve ?? null, coarse: c.coarse === true,
    },
  }));
  try {
    let failed = false;
    const replies = pool.map((w) => new Promise<Reply>((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', (e) => { failed = true; reject(e); });
    }));
    const g = new Int32Array(gate);
    while (Atomics.load(g, 0) < WORKERS && !failed) await new Promise((r) => setTimeout(r, 1));
    Atomics.store(g, 1, 1);
    Atomics.notify(g, 1);
    const all = await Promise.all(replies);
    const admissions: Row[] = [];
    all.forEach((r, worker) => {
      for (let i = 0; i < r.n; i++) {
        const kind = r.kindOf[i] as number;
        const first = r.firstAt[i] as number;
        const last = r.lastAt[i] as number;
        const row = { cost: r.costOf[i] as number, key: r.keyOf[i] as number, reads: r.readsOf[i] as number, worker, kind };
        if (kind === 0) {
          admissions.push({ ...row, t: last, first });
          continue;
        }
        // A reservation: its act time is its judged reading (one of the call's readings) plus its
        // delay, so never before the call's first reading; without delay, it is that reading.
        const at = r.actAt[i] as number;
        expect(at, 'a reservation acts before its call read the clock').toBeGreaterThanOrEqual(first);
        if (kind === KIND_NOW) expect(at, 'a reservation without delay acts after its call\'s last reading').toBeLessThanOrEqual(last);
        if (kind === KIND_CANCELLED) continue; // its cancel() gave the place back: it never acts
        admissions.push({ ...row, t: at, first: at, reserved: kind === KIND_LATER });
      }
    });
    return { limiter, replies: all, admissions: byLastReading(admissions) };
  } finally {
    await Promise.all(pool.map((w) => w.terminate()));
  }
}

/** Replays `admissions` (sorted by last reading) against one limit of `algorithm`. */
function replay(algorithm: string, admissions: Admission[], limit: Required<Limit>): ModelReport | null {
  switch (algorithm) {
    case 'gcra': return replayGcra(admissions, limit, gcraParams(limit).tickPs / 1e9); // one tick, in ms
    case 'fixed-window': return replayFixedWindow(admissions, limit);
    case 'sliding-window': return replaySlidingWindow(admissions, limit);
    case 'sliding-log': return replaySlidingLog(admissions, limit);
    default: return null;
  }
}

describe('every admission of 4 racing workers, replayed against an exact model (real clock)', () => {
  it.each(fastCases(CASES, FAST))('$name', async (c) => {
    // Every run is replayed against the model. A run must also show the attack happened: the hot
    // key limited (most attempts refused, some admitted), calls on it overlapping, compare-and-
    // swaps lost (the lock-free paths), and reservations acting later and cancelled where the
    // case makes them. A busy machine runs fewer attempts in RUN_MS, so while the runs so far
    // have not shown all of it between them, another runs, twice as long, up to MAX_RUNS (found:
    // beside two CPU-bound loops, four 400 ms runs of 'gcra, one limit' saw no compare-and-swap
    // lost, 1 time in 50).
    let missing: string[] = ['no run'];
    for (let attempt = 0; attempt < MAX_RUNS && missing.length > 0; attempt++) {
      const shown = await runAndReplay(c, RUN_MS * 2 ** attempt);
      missing = attempt === 0 ? shown : missing.filter((m) => shown.includes(m));
    }
    expect(missing, 'the runs together did not show the whole attack').toEqual([]);
    // The runs are bounded (MAX_RUNS, 25.2 s of running in all) but their replays and worker
    // starts slow down with the machine: found, one case past the suite's 60 s beside two
    // CPU-bound loops and another test run (130 s for the four busy-machine files, 2026-12-06).
  }, 300_000);
});

/** One run of case `c` for `runMs`, replayed; returns what the run failed to show (empty: all of it). */
async function runAndReplay(c: Case, runMs: number): Promise<string[]> {
  const { limiter, replies, admissions } = await run(c, runMs);
  const sum = (f: (r: Reply) => number): number => replies.reduce((s, r) => s + f(r), 0);
  expect(sum((r) => r.lost)).toBe(0); // every admission was recorded
  const missing: string[] = [];

  // The hot key was limited: refused again and again (usually most of its attempts are; on a
  // busy machine fewer attempts come in each period), and some admitted.
  const hot = admissions.filter((a) => a.key === 0);
  if (!(sum((r) => r.refused[0] as number) > hot.length / 10)) missing.push('the hot key was hardly ever refused');
  if (hot.length === 0) missing.push('the hot key admitted nothing');

  // The workers raced on the hot key: compare-and-swaps lost (the lock-free paths), and calls
  // on it overlapped (on the locked path, the sliding log's, a loser waits for the key's lock
  // or takes it over instead of retrying a compare-and-swap).
  const casRetries = sum((r) => r.casRetries);
  const overlaps = sum((r) => r.overlaps);
  if (overlaps === 0) missing.push('calls on the hot key never overlapped');
  if (limiter.algorithm !== 'sliding-log' && casRetries === 0) missing.push('no compare-and-swap ever lost a race');

  // Zero admissions that the exact model refuses, per key and limit, and for the global cap.
  const found: object[] = [];
  const close: object[] = [];
  const check = (what: string, list: Admission[], limit: Required<Limit>): void => {
    if (limiter.algorithm === 'sliding-window') {
      // The documented promise: fewer than twice permits in any period.
      const { most, from } = busiestSpan(list, limit.periodMs);
      close.push({ what, most, allowed: 2 * limit.permits - 1 });
      if (most >= 2 * limit.permits) found.push({ what, limit, admittedInOnePeriod: most, from, promised: `fewer than ${2 * limit.permits}` });
    }
    const r = replay(limiter.algorithm, list, limit) as ModelReport;
    close.push({ what, worst: r.worst, admissions: r.admissions });
    if (r.violations > 0) found.push({ what, limit, violations: r.violations, of: r.admissions, worst: r.worst, examples: r.examples });
  };
  KEYS.forEach((key, k) => {
    const mine = admissions.filter((a) => a.key === k);
    limiter.limits.forEach((limit, i) => check(`${key} limit[${i}]`, mine, limit));
  });
  if (limiter.globalLimit !== null) check('global cap', admissions, limiter.globalLimit);
  const multiRead = admissions.filter((a) => a.reads > 1).length;
  const reservations = { made: 0, later: 0, refused: 0, cancelled: 0, cancelRefused: 0 };
  for (const r of replies) for (const [k, v] of Object.entries(r.reservations)) reservations[k as keyof typeof reservations] += v;
  if (c.reserve !== undefined) {
    // Reservations were made on the hot key, some acting later, and cancels gave places back.
    if (!admissions.some((a) => a.key === 0 && a.kind === KIND_LATER)) missing.push('no reservation on the hot key acted later');
    if (reservations.cancelled === 0) missing.push('no cancel gave a place back');
  }
  const what = c.reserve === undefined ? '' : `, reservations ${JSON.stringify(reservations)}`;
  expect(found, `${c.name}: ${admissions.length} admissions (${multiRead} read the clock more than once)${what}, casRetries ${casRetries}, overlapping hot-key calls ${overlaps}; closest calls ${JSON.stringify(close)}`).toEqual([]);
  return missing;
}
