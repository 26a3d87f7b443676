// A reset of a sliding log whose lock is taken over while it writes the log fresh, replayed step
// by step: a worker resets the key and parks before a chosen compare-and-swap on the log's words
// (fixtures/cas-park-worker.mjs); the main thread takes the lock over and admits while the reset
// is half written; then the reset goes on, and the main thread admits until refused. The clock is
// a ManualClock that stands still meanwhile.
//
// Found by the kill storm (test/rate/kill-storm.test.ts, 'sliding log, with per-key controls') on
// a loaded machine: a key past its bound by 28 after the storm. The reset wrote the head word
// first, anchored at the ring's first word, then cleared the entries in the order of the words.
// A decision that took the lock over in between read the old entries from the new anchor: out of
// time order, so its binary search counted stamped entries as free, and it admitted over them.
// The reset's next compareExchange then failed (a word it had read had changed), and the reset
// ran again from the start, clearing the admissions made in between: the key was reset twice,
// once before them and once after. With a clock that stands still, the stalled reset's clearing
// also landed on a newer admission's stamp equal to the old one it had read.
//
// Then an attack on that fix: a penalty (which writes over entries that count) by the thread that
// took the lock over wrote the very stamp a stalled reset or reward had read, and the clearing
// went on over it (3 admitted on a log of 2). A log's reset and reward now hold a guarded token,
// which a decision takes over only once it is the table's reuse age old (table/slot-lock.ts), as
// a reclaim does: the table's one timing assumption. So the first describe below takes the lock
// over only past that age (a resetter that died there, or stalled past the assumption; the
// reset's own writes then still keep admissions within the log), and the second shows that a
// decision waits for a live reset or reward rather than take its lock over at claimTimeoutMs.
//
// What may pass: the reset falls somewhere among the admissions made while it was parked, so
// before it at most what the set-up left free, after it at most the whole log (of each limit).
import { describe, expect, it } from 'vitest';
import { ManualClock, PolicyLimiter, RateLimiter, type Limit } from '../../src/index.js';
import { ALL, onlyKeyState, startCasPark, until, type CasPark, type CasParkReply } from '../helpers/cas-park.js';
import { pastTimeout, stagedReuse } from '../helpers/park.js';

/** The tables' reuseAfterMs (claimTimeoutMs 1): a guarded token is taken over once this old. */
const REUSE_MS = 30;

/** What the test drives: a RateLimiter's key, or a PolicyLimiter's pair under a rule of the same limits. */
interface Subject {
  allow(): boolean;
  penalty(cost: number): void;
  handle: { table: SharedArrayBuffer };
  /** Where the first log's head word is, from the key's state. */
  logOffset: number;
  /** For the worker: the key or request, and whether it attaches a PolicyLimiter. */
  key: unknown;
  policy: boolean;
}

function subject(policy: boolean, limit: Limit[], clock: ManualClock, reuseMs = REUSE_MS): Subject {
  if (!policy) {
    const limiter = new RateLimiter({ algorithm: 'sliding-log', limit, maxKeys: 8, clock, ...stagedReuse(1, reuseMs) });
    return { allow: () => limiter.allow('k'), penalty: (cost) => { limiter.penalty('k', cost); }, handle: limiter.handle, logOffset: 0, key: 'k', policy };
  }
  const pair = { user: 'u', api: 'a' };
  const limiter = new PolicyLimiter({ rules: [{ algorithm: 'sliding-log', limit }], maxKeys: 8, clock, ...stagedReuse(1, reuseMs) });
  // A pair's state starts with its shape word (policy/pair-shape.ts).
  return { allow: () => limiter.allow(pair), penalty: (cost) => { limiter.penalty(pair, cost); }, handle: limiter.handle, logOffset: 1, key: pair, policy };
}

/** Admits cost-1 requests until one is refused; returns how many passed. */
function drain(s: Subject): number {
  let n = 0;
  while (s.allow() && n < 1_000) n++;
  return n;
}

interface Case {
  name: string;
  limit: Limit[];
  /** Set-up admissions: [clock reading, how many], in order. */
  setup: [number, number][];
  /** Where the clock stands from the reset on. */
  atMs: number;
  /** Entries that still count at `atMs` after the set-up, per limit. */
  counted: number[];
  /** The reset's compare-and-swaps on the log's words: it parks before each in turn. */
  writes: number;
}

const win = (permits: number, periodMs = 1000): Limit => ({ permits, periodMs });

const CASES: Case[] = [
  // One admission: the ring's head word points past the first entry.
  { name: 'a log of 2, one entry', limit: [win(2)], setup: [[1000, 1]], atMs: 1000, counted: [1], writes: 3 },
  // Three admissions expire, two more wrap the ring: its oldest entry is its second word.
  { name: 'a wrapped log of 4', limit: [win(4)], setup: [[1000, 3], [2100, 2]], atMs: 2100, counted: [2], writes: 5 },
  // The same, the admissions made while the reset is parked stamped later than the entries it clears.
  { name: 'a wrapped log of 4, later stamps', limit: [win(4)], setup: [[1000, 3], [2100, 2]], atMs: 2200, counted: [2], writes: 5 },
  // The stamps of the reset's clearing equal those of admissions made over the entries it has
  // yet to clear (a reset that never wrote a limit twice still cleared them here).
  { name: 'a log of 4, equal stamps', limit: [win(4)], setup: [[1000, 1], [2100, 2]], atMs: 2100, counted: [2], writes: 5 },
  // Two logs: the first written fresh, the second's head taken over, the reset tried again.
  { name: 'two logs', limit: [win(2), win(3)], setup: [[1000, 1]], atMs: 1000, counted: [1, 1], writes: 6 },
];

describe('a sliding log\'s reset taken over while it writes the log fresh (past the reuse age)', () => {
  // Every case on a RateLimiter's key; on a PolicyLimiter's pair (the same steps: policy/pair-shape.ts),
  // those of four and of two logs. Parked after the head word (before it, the reset's first write
  // fails and nothing of it stands).
  const parks = (c: Case, policy: boolean) => Array.from({ length: c.writes - 1 }, (_, i) => ({ ...c, policy, parkBefore: i + 2 }));
  const runs = [
    ...CASES.flatMap((c) => parks(c, false)),
    ...CASES.filter((c) => ['a wrapped log of 4', 'a log of 4, equal stamps', 'two logs'].includes(c.name)).flatMap((c) => parks(c, true)),
  ];

  it.each(runs)('$name (PolicyLimiter: $policy), parked before write $parkBefore: never more than the log allows', async (c) => {
    const clock = new ManualClock(c.setup[0]?.[0] ?? 1000);
    const s = subject(c.policy, c.limit, clock);
    for (const [at, n] of c.setup) {
      clock.set(at);
      for (let i = 0; i < n; i++) expect(s.allow()).toBe(true);
    }
    clock.set(c.atMs);
    const w = new Int32Array(s.handle.table);
    const log = onlyKeyState(w) + s.logOffset;
    const words = c.limit.reduce((sum, l) => sum + 2 + l.permits, 0); // each log's words, with room for a pad word
    const a = startCasPark({ handle: s.handle, key: s.key, policy: s.policy, logFrom: log, logTo: log + words, parkBefore: [c.parkBefore], op: 'reset' });
    try {
      await until('the reset parks or finishes', () => a.parkedAt() !== 0);
      const parked = a.parkedAt() === c.parkBefore;
      pastTimeout(REUSE_MS + 5); // older than the reuse age: the reset's guarded lock may be taken over
      const during = drain(s);
      a.release(ALL);
      const r = await a.reply;
      expect(r.allowed, 'the key held state: the reset says so').toBe(true);
      const after = drain(s);
      // Before the reset, what the set-up left free; after it, the whole log: of every limit.
      const bound = Math.min(...c.limit.map((l, i) => l.permits - (c.counted[i] as number) + l.permits));
      expect(during + after, JSON.stringify({ parked, during, after, writes: r.writes })).toBeLessThanOrEqual(bound);
      // And once every entry has expired, the key admits exactly its log again.
      clock.advance(3000);
      expect(drain(s)).toBe(Math.min(...c.limit.map((l) => l.permits)));
    } finally {
      a.release(ALL);
      await a.worker.terminate();
    }
  });
});

// A reset taken over past the reuse age (its holder stalled beyond the table's timing assumption)
// clears each entry only while the log's head is still its own, as a reward does: once the new
// holder commits, it stops. On a full log of 4, the reset parked before clearing its third entry;
// the new holder admits 2 and penalizes 2 at the same stamp, filling the log. The parked clearing
// then lands on the penalty's first entry (a stall between the head check and the compareExchange:
// outside the assumption, it frees that entry out of the ring's time order, and the log then
// admits past its bound); without the check the reset went on to clear the second as well.
describe('a sliding log\'s reset taken over past the reuse age stops clearing once the new holder commits', () => {
  it.each([false, true])('PolicyLimiter: %s', async (policy) => {
    const clock = new ManualClock(1000);
    const s = subject(policy, [win(4)], clock);
    for (let i = 0; i < 4; i++) expect(s.allow()).toBe(true);
    const w = new Int32Array(s.handle.table);
    const log = onlyKeyState(w) + s.logOffset;
    const a = startCasPark({ handle: s.handle, key: s.key, policy, logFrom: log, logTo: log + 5, parkBefore: [4], op: 'reset' });
    try {
      await until('the reset parks', () => a.parkedAt() !== 0);
      expect(a.parkedAt()).toBe(4); // the head and two entries written
      pastTimeout(REUSE_MS + 5); // its guarded lock is taken over
      expect(s.allow()).toBe(true);
      expect(s.allow()).toBe(true);
      s.penalty(2);
      a.release(ALL);
      const r = await a.reply;
      // The parked clearing (4) landed; none after it, the head being the new holder's.
      expect(r.writes.map((x) => x.n), JSON.stringify(r.writes)).toEqual([1, 2, 3, 4]);
    } finally {
      a.release(ALL);
      await a.worker.terminate();
    }
  });
});

/**
 * Lets `other` run for up to 300 ms beside the parked `a` (taking the lock over from a live holder
 * after claimTimeoutMs, it would finish meanwhile), then releases `a`: whether `other` finished
 * while `a` was parked, and both replies.
 */
async function besideParked(a: CasPark, other: CasPark): Promise<{ tookOver: boolean; ra: CasParkReply; rb: CasParkReply }> {
  let done = false;
  void other.reply.then(() => { done = true; });
  const end = Date.now() + 300;
  while (!done && Date.now() < end) await new Promise((r) => setTimeout(r, 1));
  const tookOver = done;
  a.release(ALL);
  const [ra, rb] = await Promise.all([a.reply, other.reply]);
  return { tookOver, ra, rb };
}

interface GuardCase {
  name: string;
  permits: number;
  /** The parked worker's call, parked before its compare-and-swap number `parkBefore` on the log's words. */
  op: 'reset' | 'reward';
  parkBefore: number;
  /** The other thread's calls meanwhile: [what, cost]; its admissions count. */
  calls: ['allow' | 'penalty', number][];
  /** The most that may pass, its calls' admissions and the drain after, from a full log. */
  bound: number;
}

// From the attack, on a full log: the parked reset has cleared the oldest entry (or, with a log of
// 4, two), the parked reward has moved the head back and checked it before its clearing.
const GUARD_CASES: GuardCase[] = [
  { name: 'a reset, then an admission and a penalty', permits: 2, op: 'reset', parkBefore: 3, calls: [['allow', 1], ['penalty', 1]], bound: 2 },
  { name: 'a reset, then an admission of 2 and a penalty of 2', permits: 4, op: 'reset', parkBefore: 4, calls: [['allow', 2], ['penalty', 2]], bound: 4 },
  { name: 'a reward of 1, then a penalty', permits: 2, op: 'reward', parkBefore: 2, calls: [['penalty', 1]], bound: 1 },
];

describe('a sliding log\'s reset or reward holds its lock against decisions until the reuse age', () => {
  const runs = [false, true].flatMap((policy) => GUARD_CASES.map((c) => ({ ...c, policy })));

  it.each(runs)('$name (PolicyLimiter: $policy): the other thread waits, and never more than the log allows', async (c) => {
    const clock = new ManualClock(1000);
    // A reuse age far past anything the test waits: a decision never takes the guarded lock over.
    const s = subject(c.policy, [win(c.permits)], clock, 10_000);
    for (let i = 0; i < c.permits; i++) expect(s.allow()).toBe(true);
    const w = new Int32Array(s.handle.table);
    const log = onlyKeyState(w) + s.logOffset;
    const start = (op: string, parkBefore: number[], then: ['allow' | 'penalty', number][]) =>
      startCasPark({ handle: s.handle, key: s.key, policy: s.policy, logFrom: log, logTo: log + c.permits + 1, parkBefore, op, then });
    const a = start(c.op, [c.parkBefore], []);
    let b: ReturnType<typeof start> | null = null;
    try {
      await until('the reset or reward parks', () => a.parkedAt() !== 0);
      expect(a.parkedAt()).toBe(c.parkBefore);
      const [first, ...rest] = c.calls;
      const other = start((first as ['allow' | 'penalty', number])[0], [], rest);
      b = other;
      // The other thread's calls: before the guard, taken over at 1 ms; given 300 ms, they wait.
      const { tookOver, ra, rb } = await besideParked(a, other);
      expect(ra.allowed).toBeTruthy();
      const theirs = [rb.allowed, ...rb.results].filter((r, i) => (c.calls[i] as ['allow' | 'penalty', number])[0] === 'allow' && r === true).length;
      const after = drain(s);
      expect(theirs + after, JSON.stringify({ theirs, after, a: ra.writes, b: rb.writes })).toBeLessThanOrEqual(c.bound);
      expect(tookOver, 'the other thread took the lock of a live reset or reward over').toBe(false);
    } finally {
      a.release(ALL);
      await Promise.all([a.worker.terminate(), b?.worker.terminate()]);
    }
  });
});

// Found by the second attack: a PolicyLimiter decision that writes its pair's state over (a change
// of rules to another shape, or the pair's first decision, NO_SHAPE) clears a log's entries by
// compareExchange from the words it read, as a reset does, and held an ordinary token: another
// decision took its lock over at claimTimeoutMs, wrote a stamp equal to a word it had read, and
// its clearing landed on it (3 admitted on a log of 2, both cases). Such a decision now takes a
// guarded token (pair-shape.ts, writesState).
describe('a PolicyLimiter decision that writes its pair\'s state over holds its lock against decisions', () => {
  const NO_ENTRY = -0x80000000;
  const cases = [
    { name: 'a change of rules to another shape', startMs: 1000, rulesChange: true },
    { name: 'the pair\'s first decision, on a clock at 0', startMs: 0, rulesChange: false },
  ];

  it.each(cases)('$name: the other thread waits, and never more than the log allows', async (c) => {
    const clock = new ManualClock(c.startMs);
    const pair = { user: 'u', api: 'a' };
    const limiter = new PolicyLimiter({ rules: [{ algorithm: 'sliding-log', limit: win(2) }], maxKeys: 8, clock, ...stagedReuse(1, 10_000) });
    const w = new Int32Array(limiter.handle.table);
    let range: { logFrom: number; logTo: number; parkBefore: number[]; parkOn?: [number, number] };
    if (c.rulesChange) {
      expect(limiter.allow(pair)).toBe(true);
      expect(limiter.allow(pair)).toBe(true); // the log is full
      // Another shape, stamps in the same ticks: the reshape clears entries holding today's stamp.
      limiter.setRules([{ algorithm: 'sliding-log', limit: win(2, 2000) }]);
      const log = onlyKeyState(w) + 1;
      range = { logFrom: log, logTo: log + 2, parkBefore: [2] }; // its head written, before its first entry
    } else {
      // The pair's words are 0 until its first decision shapes it, and so is a stamp at 0 ms.
      range = { logFrom: 0, logTo: w.length - 1, parkBefore: [], parkOn: [0, NO_ENTRY] };
    }
    const a = startCasPark({ handle: limiter.handle, key: pair, policy: true, ...range });
    let b: ReturnType<typeof startCasPark> | null = null;
    try {
      await until('the first decision parks', () => a.parkedAt() !== 0);
      expect(a.parkedAt()).toBeGreaterThan(0);
      const other = startCasPark({ handle: limiter.handle, key: pair, policy: true, logFrom: 0, logTo: -1, parkBefore: [] });
      b = other;
      const { tookOver, ra, rb } = await besideParked(a, other);
      let after = 0;
      while (limiter.allow(pair) && after < 100) after++;
      const admitted = [ra.allowed, rb.allowed].filter((x) => x === true).length + after;
      expect(admitted, JSON.stringify({ a: ra.allowed, b: rb.allowed, after, writes: ra.writes })).toBeLessThanOrEqual(2);
      expect(tookOver, 'the other thread took the lock of a live reshape over').toBe(false);
    } finally {
      a.release(ALL);
      await Promise.all([a.worker.terminate(), b?.worker.terminate()]);
    }
  });
});
