// PolicyLimiter under races: a rule change while workers hammer one pair, and a reclaim left
// half done by a thread that stopped. Workers import dist/ (build first).
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, perHour, perSecond, PolicyLimiter, type PolicyRule } from '../../src/index.js';
import { DEAD, EMPTY, S_CTRL, S_TAT, TOMB } from '../../src/table/layout.js';
import { slotBaseOf } from '../helpers/slots.js';
import { result } from '../helpers/workers.js';
import { HASHED_LAYOUT } from '../helpers/layout.js';

const workerUrl = new URL('../fixtures/policy-worker.mjs', import.meta.url);

describe('PolicyLimiter: one rule change while 4 workers hammer one pair (frozen clock)', () => {
  const WORKERS = 4;
  const TRIALS = 40;
  const FIXED = 10;
  const LOG = 20;
  const fixedWindow: PolicyRule[] = [{ algorithm: 'fixed-window', limit: { permits: FIXED, periodMs: 60_000 } }];
  const slidingLog: PolicyRule[] = [{ algorithm: 'sliding-log', limit: { permits: LOG, periodMs: 60_000 } }];
  // ctl words: see the fixture.
  const READY = 0;
  const GO = 1;
  const CALLS = 2;
  const MOST_IN_FLIGHT = 4;
  let pool: Worker[] = [];
  let policy: PolicyLimiter;
  const ctl = new Int32Array(new SharedArrayBuffer(4 * 8));

  beforeAll(async () => {
    policy = new PolicyLimiter({ rules: fixedWindow, maxKeys: 64, clock: new ManualClock(), maxStateWords: 32 });
    pool = Array.from({ length: WORKERS }, () => new Worker(workerUrl, { workerData: { handle: policy.handle, ctl: ctl.buffer } }));
    await Promise.all(pool.map((w) => result(w)));
  });

  afterAll(async () => {
    await Promise.all(pool.map((w) => w.terminate()));
  });

  it('moves the pair to the new rule once: the new rule admits exactly its own limit, never a fresh start under the old one', async () => {
    const rulesVersion = new Int32Array(policy.handle.rules);
    const totals: number[] = [];
    let raced = 0;
    for (let trial = 1; trial <= TRIALS; trial++) {
      if (trial > 1) policy.setRules(fixedWindow);
      const request = { user: `u${trial}`, api: 'a' };
      // The frozen instant's fixed window, spent by the main thread: under the old rule the workers
      // can only be refused.
      let spent = 0;
      while (policy.tryAcquire(request).allowed) spent++;
      expect(spent).toBe(FIXED);
      Atomics.store(ctl, READY, 0);
      Atomics.store(ctl, CALLS, 0);
      const from = Atomics.load(rulesVersion, 0);
      const replies = pool.map((w) => result<{ admitted: number; raced: number }>(w));
      for (const w of pool) w.postMessage({ trial, ...request, from, after: 200 });
      while (Atomics.load(ctl, READY) < WORKERS) await new Promise((r) => setTimeout(r, 1));
      Atomics.store(ctl, GO, trial);
      Atomics.notify(ctl, GO);
      // Let every worker queue on the pair's lock under the old rule, then replace the rules.
      while (Atomics.load(ctl, CALLS) < 100 * WORKERS) Atomics.wait(ctl, CALLS, Atomics.load(ctl, CALLS), 1);
      policy.setRules(slidingLog);
      const results = await Promise.all(replies);
      totals.push(results.reduce((sum, r) => sum + r.admitted, 0));
      raced += results.reduce((sum, r) => sum + r.raced, 0);
      // Whatever the workers did, the pair is now under the sliding log, spent to its limit.
      expect(policy.tryAcquire(request)).toMatchObject({ allowed: false, remaining: 0 });
    }
    // The clock never moves: the old rule's window was spent before the change, and the new rule
    // starts the pair fresh once, so the workers get exactly the new rule's LOG permits per trial.
    // Each move back to the old rule would start the pair fresh again, and the next move forward
    // fresh once more.
    expect({ totals, over: totals.filter((t) => t > LOG).length }).toEqual({ totals: Array(TRIALS).fill(LOG), over: 0 });
    // Contention: several decisions were in flight at once, and some spanned the rule change.
    expect(Atomics.load(ctl, MOST_IN_FLIGHT)).toBeGreaterThanOrEqual(2);
    expect(raced).toBeGreaterThan(0);
  });
});

describe('PolicyLimiter: a thread that cannot read the rules a pair was moved to', () => {
  it('refuses without moving the pair back to its older rules, and follows the new ones once readable', () => {
    const clock = new ManualClock();
    const old: PolicyRule[] = [{ algorithm: 'fixed-window', limit: { permits: 3, periodMs: 60_000 } }];
    const next: PolicyRule[] = [{ algorithm: 'sliding-log', limit: { permits: 5, periodMs: 60_000 } }];
    const a = new PolicyLimiter({ rules: old, maxKeys: 8, clock });
    const b = PolicyLimiter.attach(a.handle); // holds version 0
    const request = { user: 'u', api: 'a' };
    a.setRules(next); // version 1, in half 1 of the store
    let admitted = 0;
    while (a.tryAcquire(request).allowed) admitted++;
    expect(admitted).toBe(5); // the pair is shaped under version 1
    // Tear version 1 as a stalled writer could (see rules-store.ts): its JSON no longer parses.
    const store = new Int32Array(a.handle.rules);
    const length = Atomics.load(store, 3); // [version, writer lock, length of half 0, of half 1]
    Atomics.store(store, 3, length - 1);
    // b keeps version 0, whose rule would start the pair fresh under a new window of 3.
    expect(b.tryAcquire(request)).toMatchObject({ allowed: false, reason: 'limited', retryAfterMs: 1 });
    expect(b.tryAcquire(request, 0).allowed).toBe(false);
    Atomics.store(store, 3, length);
    expect(b.tryAcquire(request)).toMatchObject({ allowed: false, reason: 'limited', remaining: 0 });
    expect(b.ruleFor(request)).toEqual(next[0]);
    expect(a.tryAcquire(request).allowed).toBe(false); // the pair kept its log: nothing refunded
  });
});

describe('PolicyLimiter: a reclaim left half done by a thread that stopped', () => {
  // maxKeys 1: one stripe of two slots. 'busy' holds quota for an hour; 'gone' is idle. HASHED:
  // there the new key's insert leaves no tombstone (a SLAB table's leaves its index one until
  // the next compaction).
  function setup() {
    const clock = new ManualClock();
    const policy = new PolicyLimiter({ rules: [{ limit: perSecond(2) }, { user: 'busy', limit: perHour(2) }], maxKeys: 1, clock, ...HASHED_LAYOUT });
    expect(policy.stats().capacity).toBe(2);
    expect(policy.tryAcquire({ user: 'gone', api: 'x' }).allowed).toBe(true);
    expect(policy.tryAcquire({ user: 'busy', api: 'x' }).allowed).toBe(true);
    clock.advance(10_000);
    const base = slotBaseOf(policy.handle.table, '4:gonex');
    expect(base).toBeGreaterThan(0);
    // What a reclaimer leaves when it stops right after its linearisation point: the reclaim
    // marker in the key's lock word, ctrl still LIVE.
    const w = new Int32Array(policy.handle.table);
    Atomics.store(w, base + S_TAT, DEAD);
    return { policy, w, base };
  }

  it('sweep() finishes it: the slot is freed', () => {
    const { policy, w, base } = setup();
    expect(policy.sweep()).toBe(1);
    // A tombstone, or EMPTY when no live key's probe chain crosses it (the sweep compacts).
    expect([TOMB, EMPTY]).toContain(Atomics.load(w, base + S_CTRL) & 3);
    expect(policy.tryAcquire({ user: 'new', api: 'x' }).allowed).toBe(true);
    expect(policy.stats()).toMatchObject({ liveKeys: 2, tombstones: 0 });
  });

  it('a new key that needs the slot finishes it and takes the slot', () => {
    const { policy, w, base } = setup();
    expect(policy.tryAcquire({ user: 'new', api: 'x' })).toMatchObject({ allowed: true, reason: 'allowed' });
    expect(slotBaseOf(policy.handle.table, '3:newx')).toBe(base);
    expect(Atomics.load(w, base + S_TAT)).not.toBe(DEAD);
    expect(policy.stats()).toMatchObject({ liveKeys: 2, tombstones: 0 });
  });
});
