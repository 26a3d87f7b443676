import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { gcraParams } from '../../src/math/gcra.js';
import {
  ConcurrencyLimiter, ManualClock, perDay, perHour, perMinute, perSecond, PolicyLimiter, RateLimiter,
  type Clock, type Decision, type Limit, type PolicyRequest, type RateLimiterOptions,
} from '../../src/index.js';

// Regression tests for issue 8, "found" items 3, 4, 8 and the lone surrogates of PolicyLimiter.
// Each says which item it covers. Time comes from a ManualClock or a plain `{ now: () => t }`;
// the only real timer is the deadline that turns a hang into a failure.

const TWO_32 = 2 ** 32;
const TWO_63 = 2n ** 63n;
const TWO_64 = 2n ** 64n;

// --- Worker plumbing for calls that used to hang ----------------------------------------------

const workerUrl = new URL('../fixtures/edges-worker.mjs', import.meta.url);
/** Generous for a worker's start-up on a busy machine; the hang it guards against is for ever. */
const DEADLINE_MS = 10_000;

type Step = { cost: number } & ({ key: string } | { request: PolicyRequest });
interface Scenario {
  kind: 'rate' | 'policy';
  options: Record<string, unknown>;
  startMs: number;
  steps: Step[];
}

/** Runs `scenario` in a worker (fixtures/edges-worker.mjs, over dist/); rejects if it hangs. */
async function inWorker(scenario: Scenario): Promise<{ width: 32 | 64 | null; decisions: Decision[] }> {
  const worker = new Worker(workerUrl, { workerData: scenario });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await new Promise((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${DEADLINE_MS} ms: tryAcquire hangs`)), DEADLINE_MS);
      worker.once('message', resolve);
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`the worker exited (${code}) without answering`)));
    });
  } finally {
    clearTimeout(timer);
    await worker.terminate(); // also ends a worker stuck in a loop
  }
}

/** `n` requests of cost 1 on `key`, all at the scenario's current instant. */
function tries(key: string, n: number): Step[] {
  return Array.from({ length: n }, () => ({ key, cost: 1 }));
}

function allowedCount(decisions: Decision[]): number {
  return decisions.filter((d) => d.allowed).length;
}

describe('issue 8, found 3: a new state on the reclaim marker used to loop for ever', () => {
  it('32 bits: a new key at 2^31 ticks (2^31 / 1e5 ms at 10 ns) is answered: allowed, the burst at most', async () => {
    const startMs = 2 ** 31 / 1e5;
    const { width, decisions } = await inWorker({
      kind: 'rate', options: { limit: perSecond(10), maxKeys: 10 }, startMs, steps: [...tries('a', 20), ...tries('b', 1)],
    });
    expect(decisions[0]).toMatchObject({ allowed: true, reason: 'allowed' });
    // The fresh TAT is stored one tick late (conservative by a tick): 9 or 10 at this instant, never 11.
    const admitted = allowedCount(decisions.slice(0, 20));
    expect(admitted).toBeGreaterThanOrEqual(9);
    expect(admitted).toBeLessThanOrEqual(10);
    expect(decisions[20]?.allowed).toBe(true); // the table still inserts other keys
    expect(width).toBe(32);
    // The reading is the one that matters: 10 ns ticks, so 2^31 ticks, whose int32 is the marker.
    expect(gcraParams(perSecond(10)).tickPs).toBe(1e4);
    expect((startMs * 1e5) | 0).toBe(-(2 ** 31));
  });

  // 0.1 ps per request is a whole number of ticks only at the finest tick, 0.1 ps (1e10 per ms):
  // the limiter takes the coarsest tick that holds the interval exactly, so this one runs there.
  const finest: Limit = { permits: 1e10, periodMs: 1, burst: 1e10 };

  it('64 bits: a new key at 2^63 ticks modulo 2^64 (2^53 ms at 0.1 ps ticks) is answered', async () => {
    const { width, decisions } = await inWorker({
      kind: 'rate', options: { limit: finest, maxKeys: 10 }, startMs: 2 ** 53,
      steps: [{ key: 'a', cost: 1 }, { key: 'a', cost: 0 }, { key: 'b', cost: 1 }],
    });
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true]);
    // A fresh TAT on the marker is stored a tick later: at most one request of the burst lost.
    expect(decisions[1]?.remaining).toBeGreaterThanOrEqual(1e10 - 2);
    expect(decisions[1]?.remaining).toBeLessThanOrEqual(1e10 - 1);
    expect(width).toBe(64);
    const p = gcraParams(finest);
    expect([p.width, p.tickPs, p.intervalTicks]).toEqual([64, 0.1, 1]);
    expect((BigInt(2 ** 53) * 10n ** 10n) % TWO_64).toBe(TWO_63); // ticks = 2^53 ms * 1e10 per ms
  });

  it.each([
    // [name, limit, reading in whole ms, ticks per ms, cost]: reading * perMs + cost * interval = 2^63 mod 2^64.
    ['1e13 per second (0.1 ps ticks), cost 1e10 at 2^53 - 1 ms', finest, 2 ** 53 - 1, 10n ** 10n, 1e10],
    ['1e12 per second (1 ps ticks), cost 3,072 at 4,831,746,451,854,706 ms', { permits: 1e9, periodMs: 1, burst: 1e9 }, 4_831_746_451_854_706, 10n ** 9n, 3_072],
  ] as [string, Limit, number, bigint, number][])('64 bits: an admission whose new TAT is the marker: %s', async (_, limit, startMs, perMs, cost) => {
    const burst = limit.burst ?? limit.permits;
    const { width, decisions } = await inWorker({
      kind: 'rate', options: { limit, maxKeys: 10 }, startMs,
      steps: [{ key: 'a', cost }, { key: 'a', cost: 0 }, { key: 'a', cost: 1 }, { key: 'b', cost: 1 }],
    });
    expect(decisions[0]).toMatchObject({ allowed: true, remaining: burst - cost });
    expect(decisions[3]?.allowed).toBe(true); // the table still inserts other keys
    // Stored one tick later than the marker: the key keeps its debt (not fresh), a tick at most
    // more, so the rest of the burst passes (or, with the whole burst spent, nothing more).
    expect(decisions[1]?.remaining).toBeGreaterThanOrEqual(Math.max(0, burst - cost - 1));
    expect(decisions[1]?.remaining).toBeLessThanOrEqual(burst - cost);
    expect(decisions[2]?.allowed).toBe(burst - cost >= 2);
    expect(width).toBe(64);
    const p = gcraParams(limit);
    expect(p.width).toBe(64);
    expect(BigInt(Math.round(1e9 / p.tickPs))).toBe(perMs);
    expect((BigInt(startMs) * perMs + BigInt(cost) * BigInt(p.intervalTicks)) % TWO_64).toBe(TWO_63);
  });

  // The locked paths keep a lock in the slot's tat word, not a TAT: they did not hang before
  // b6ae18f either. These pin that every kind still answers, exactly, at that instant.
  it.each([
    ['several GCRA limits', 'rate', { limit: [perSecond(10), perMinute(100)] }],
    ['fixed-window', 'rate', { limit: perSecond(10), algorithm: 'fixed-window' }],
    ['sliding-window', 'rate', { limit: perSecond(10), algorithm: 'sliding-window' }],
    ['sliding-log', 'rate', { limit: perSecond(10), algorithm: 'sliding-log' }],
    ['a global cap', 'rate', { limit: perSecond(100), globalLimit: perSecond(10) }],
    ['PolicyLimiter', 'policy', { rules: [{ limit: perSecond(10) }] }],
  ] as [string, 'rate' | 'policy', Record<string, unknown>][])('locked path, %s: answered at 2^31 / 1e5 ms, exactly 10 of 20', async (_, kind, options) => {
    const request = { user: 'u', api: 'a' };
    const steps: Step[] = kind === 'policy' ? Array.from({ length: 20 }, () => ({ request, cost: 1 })) : tries('a', 20);
    const { decisions } = await inWorker({ kind, options: { ...options, maxKeys: 10 }, startMs: 2 ** 31 / 1e5, steps });
    expect(decisions[0]?.allowed).toBe(true);
    expect(allowedCount(decisions)).toBe(10);
  });
});

// --- Issue 8, found 4: the year 2038 ---------------------------------------------------------

/** A limiter of some kind, reduced to one attempt on one key: true if admitted. */
interface Kind {
  name: string;
  /** Whether staleness lives in the 32-bit seconds word (see the 70-year and 136-year tests below). */
  secondsWord: boolean;
  make(clock: Clock): () => boolean;
  /** For RateLimiter kinds: the limiter itself, to check which path (width) it runs. */
  limiter?: (clock: Clock) => RateLimiter;
  width?: 32 | 64 | null;
}

function rate(name: string, options: Record<string, unknown>, width: 32 | 64 | null, secondsWord = true): Kind {
  const limiter = (clock: Clock): RateLimiter => new RateLimiter({ ...options, maxKeys: 10, clock } as RateLimiterOptions);
  return {
    name: `RateLimiter, ${name}`,
    secondsWord,
    limiter,
    width,
    make: (clock) => {
      const l = limiter(clock);
      return () => l.allow('k');
    },
  };
}

function policy(name: string, rule: Record<string, unknown>, secondsWord: boolean): Kind {
  return {
    name: `PolicyLimiter, ${name}`,
    secondsWord,
    make: (clock) => {
      const limiter = new PolicyLimiter({ rules: [rule as { limit: Limit }], maxKeys: 10, clock });
      return () => limiter.tryAcquire({ user: 'u', api: 'a' }).allowed;
    },
  };
}

// Every kind admits 10 at once from a fresh key (10 per second, or burst 10).
const KINDS: Kind[] = [
  rate('GCRA at width 32', { limit: perSecond(10) }, 32),
  // Width 64 needs a limit 32 bits cannot hold: 300 per second (3.33... ms, not a whole 10 ns) with burst 10.
  rate('GCRA at width 64', { limit: { permits: 300, periodMs: 1_000, burst: 10 } }, 64, false),
  rate('several GCRA limits', { limit: [perSecond(10), perMinute(100)] }, null),
  rate('several GCRA limits, one at width 64', { limit: [perSecond(10), perDay(1e6)] }, null),
  rate('a global cap', { limit: perSecond(100), globalLimit: perSecond(10) }, null),
  rate('fixed-window', { limit: perSecond(10), algorithm: 'fixed-window' }, null),
  rate('sliding-window', { limit: perSecond(10), algorithm: 'sliding-window' }, null),
  rate('sliding-log', { limit: perSecond(10), algorithm: 'sliding-log' }, null),
  policy('GCRA', { limit: perSecond(10) }, false),
  policy('fixed-window', { algorithm: 'fixed-window', limit: perSecond(10) }, true),
  {
    name: 'ConcurrencyLimiter, maxInFlight 10 (leases kept)',
    secondsWord: true,
    make: (clock) => {
      const limiter = new ConcurrencyLimiter({ maxInFlight: 10, leaseMs: 30_000, maxKeys: 10, clock });
      return () => limiter.tryAcquire('k').allowed;
    },
  },
];

const STARTS: [string, number][] = [
  ['2040-01-01', Date.UTC(2040, 0, 1)],
  ['2^53 - 10^6 ms', 2 ** 53 - 1e6],
  ['2106-02-08, past 2^32 s', Date.UTC(2106, 1, 8)],
];

const YEAR_MS = 365 * 86_400_000;
const IDLES: [string, number][] = [
  ['10 minutes', 600_000],
  ['a day', 86_400_000],
  ['a year', YEAR_MS],
  ['140 years', 140 * YEAR_MS],
];

/** How many of 100 attempts at one instant pass. */
function hundred(attempt: () => boolean): number {
  let admitted = 0;
  for (let i = 0; i < 100; i++) if (attempt()) admitted++;
  return admitted;
}

describe('issue 8, found 4: past 2^31 s on the clock (2038), keys do not all look idle', () => {
  const cases = KINDS.flatMap((kind) => STARTS.map(([when, ms]) => [kind.name, when, kind, ms] as const));
  it.each(cases)('%s, from %s: 10 of 100 at once, none 1 ms later, and fresh again after each long idle', (_, __, kind, startMs) => {
    let t = startMs;
    const attempt = kind.make({ now: () => t });
    expect(hundred(attempt)).toBe(10);
    t += 1;
    expect(hundred(attempt)).toBe(0);
    let idles = 0;
    for (const [label, idleMs] of IDLES) {
      if (t + idleMs + 1 > 2 ** 53) continue; // the clock holds no later reading
      idles++;
      t += idleMs;
      expect(hundred(attempt), `after ${label} idle`).toBe(10);
      t += 1;
      expect(hundred(attempt), `1 ms after that`).toBe(0);
    }
    expect(idles).toBeGreaterThan(0);
  });

  it.each(KINDS.filter((k) => k.limiter !== undefined).map((k) => [k.name, k] as const))('%s runs the path these tests mean (limiter.width)', (_, kind) => {
    expect(kind.limiter?.({ now: () => Date.UTC(2040, 0, 1) }).width).toBe(kind.width);
  });

  it.each(STARTS)('ConcurrencyLimiter from %s: 10 leases, the 11th refused, one more after a release', (_, startMs) => {
    const t = startMs;
    const limiter = new ConcurrencyLimiter({ maxInFlight: 10, leaseMs: 30_000, maxKeys: 10, clock: { now: () => t } });
    const leases = Array.from({ length: 10 }, () => limiter.tryAcquire('k'));
    expect(leases.every((d) => d.allowed && d.lease !== null)).toBe(true);
    const eleventh = limiter.tryAcquire('k');
    expect(eleventh).toMatchObject({ allowed: false, reason: 'limited', lease: null });
    expect(eleventh.retryAfterMs).toBeGreaterThan(0);
    expect(eleventh.retryAfterMs).toBeLessThanOrEqual(30_000);
    expect(leases[3]?.lease?.release()).toBe(true);
    expect(limiter.tryAcquire('k').allowed).toBe(true);
    expect(limiter.tryAcquire('k').allowed).toBe(false);
  });

  // Regression (found while writing these). After an idle of 2^31 s to 2^32 s (68 to 136 years),
  // every kind whose staleness lives in the 32-bit seconds word admitted without limit: 100 of 100
  // at one instant, against 10. `isStale` took the difference modulo 2^32 unsigned (stale) but the
  // raise took it signed (not later), so no admission raised lastSec and the key stayed "stale".
  // Now one rule (raiseStamp) raises the word whenever the reading is newer than what was loaded.
  const idle70 = 70 * YEAR_MS;
  it.each(KINDS.filter((k) => k.secondsWord).map((k) => [k.name, k] as const))('%s admits exactly 10 of 100 after 70 years idle', (_, kind) => {
    let t = Date.UTC(2040, 0, 1);
    const attempt = kind.make({ now: () => t });
    expect(hundred(attempt)).toBe(10);
    t += idle70;
    expect(hundred(attempt)).toBe(10);
    expect(hundred(attempt)).toBe(0);
  });

  // The one corner left, documented in docs/design.md section 2 (conservative only): after an idle
  // of a whole multiple of 2^32 s (136.1 years), give or take staleSec, the seconds word reads as
  // if no time had passed, and so do the 32-bit TATs, stamps and window indices (a second is a
  // whole number of ticks). The key may then be refused for a while; it is never admitted beyond
  // its limit, and it is fresh again once that while has passed.
  it.each(KINDS.filter((k) => k.secondsWord).map((k) => [k.name, k] as const))('%s after 2^32 s + 1 ms idle: never more than the limit, fresh again within staleSec', (_, kind) => {
    let t = Date.UTC(2040, 0, 1);
    const attempt = kind.make({ now: () => t });
    expect(hundred(attempt)).toBe(10);
    t += TWO_32 * 1_000 + 1;
    expect(hundred(attempt)).toBeLessThanOrEqual(10);
    t += 13 * 86_400_000; // the longest staleSec at width 32 is 12.4 days
    const later = hundred(attempt);
    expect(later).toBeLessThanOrEqual(10);
    expect(later).toBeGreaterThan(0);
  });

  it.each(KINDS.filter((k) => !k.secondsWord).map((k) => [k.name, k] as const))('%s is fresh after 70 years and after 2^32 s + 1 ms idle', (_, kind) => {
    let t = Date.UTC(2040, 0, 1);
    const attempt = kind.make({ now: () => t });
    for (const idleMs of [idle70, TWO_32 * 1_000 + 1]) {
      expect(hundred(attempt)).toBe(10);
      t += idleMs;
    }
    expect(hundred(attempt)).toBe(10);
  });
});

// --- Found while writing these: window boundaries at large clock readings ---------------------

describe('fixed windows at clock readings near 2^53 ms', () => {
  // Regression (found while writing these). floorDiv (src/algorithms/types.ts) lifted ms / periodMs
  // by a relative 1 + 2^-50, moving every boundary t * 2^-50 ms early at reading t: 8 ms near
  // 2^53 ms. A fixed window then opened early and admitted more than `permits` in one window.
  // Now it snaps only within the quotient's own ulp.
  it('3 per second does not admit a 4th 7 ms before its window ends', () => {
    let t = 8_999_999_999_999_000;
    const limiter = new RateLimiter({ limit: perSecond(3), algorithm: 'fixed-window', maxKeys: 4, clock: { now: () => t } });
    expect(limiter.tryAcquire('k', 3).allowed).toBe(true);
    t += 993;
    expect(Math.floor(t / 1_000)).toBe(8_999_999_999_999); // the same aligned window
    expect(limiter.tryAcquire('k').allowed).toBe(false);
  });
});

// --- Issue 8, found 8: PolicyLimiter debt across a rule change -------------------------------

describe('issue 8, found 8: debt carried across setRules', () => {
  const request = { user: 'u', api: 'a' };

  /** A policy with one default rule; spends `cost` at 1,000 ms, then switches to `next`. */
  function switched(first: Limit, cost: number, next: Limit) {
    const clock = new ManualClock(1_000);
    const limiter = new PolicyLimiter({ rules: [{ limit: first }], maxKeys: 10, clock });
    expect(limiter.tryAcquire(request, cost).allowed).toBe(true);
    limiter.setRules([{ limit: next }]);
    const at = (ms: number): number => {
      clock.set(ms);
      let admitted = 0;
      while (admitted < 1_000 && limiter.tryAcquire(request).allowed) admitted++;
      return admitted;
    };
    return { limiter, at };
  }

  it('30 s of debt under perMinute(60), then perSecond(10): none until the debt is down to 900 ms, to the instant', () => {
    const { limiter, at } = switched(perMinute(60), 30, perSecond(10));
    expect(limiter.tryAcquire(request)).toMatchObject({ allowed: false, reason: 'limited', retryAfterMs: 29_100 });
    expect(at(1_000)).toBe(0); // 10 before the fix
    expect(at(2_000)).toBe(0);
    expect(at(30_100 - 1e-6)).toBe(0);
    expect(at(30_100)).toBe(1); // exact: 30 s is 3e12 ticks of 10 ps, 3e13 of 1 ps
    expect(at(30_199)).toBe(0);
    expect(at(30_200)).toBe(1);
  });

  // A day of debt: perDay(86_400) spent at once (one request a second). Its ticks (10 ps) become
  // 8.64e16 of the new rule's: above 2^53, where the rescaling is a float estimate lifted by
  // 2^-50 (src/algorithms/gcra.ts rescaleUp), so admissions resume up to ~100 ps late, never early.
  it.each([
    ['perSecond(10)', perSecond(10), 100],
    ['perSecond(100)', perSecond(100), 10],
  ] as [string, Limit, number][])('a day of debt, then %s: none for a day less one burst, then one at a time', (_, next, intervalMs) => {
    const { limiter, at } = switched(perDay(86_400), 86_400, next);
    const resumeAt = 1_000 + 86_400_000 - 1_000 + intervalMs; // the debt is down to burst - 1 intervals
    expect(limiter.tryAcquire(request)).toMatchObject({ allowed: false, reason: 'limited' });
    expect(at(1_000)).toBe(0); // 10 (100) before the fix
    expect(at(2_000)).toBe(0);
    expect(at(resumeAt - 1e-6)).toBe(0); // never early
    expect(at(resumeAt + 1e-6)).toBe(1); // late by the rounding at most
    expect(at(resumeAt + intervalMs - 1e-6)).toBe(0);
    expect(at(resumeAt + intervalMs + 1e-6)).toBe(1);
  });

  it('a day of debt, then perHour(100), a coarser tick (10 ps to 500 ps): none until 3,564 s of debt are left', () => {
    const { at } = switched(perDay(86_400), 86_400, perHour(100));
    const resumeAt = 1_000 + 86_400_000 - 3_564_000;
    expect(at(1_000)).toBe(0); // 86 before the fix
    expect(at(resumeAt - 1e-6)).toBe(0);
    expect(at(resumeAt + 1e-6)).toBe(1);
    expect(at(resumeAt + 36_000 - 1e-6)).toBe(0);
  });

  it('one of perSecond(2) spent, then perHour(100), a coarser tick: 99 left, not 100', () => {
    // This one passed before b6ae18f too: it pins the direction opposite to the next test.
    const { limiter, at } = switched(perSecond(2), 1, perHour(100));
    expect(limiter.tryAcquire(request, 0).remaining).toBe(99);
    expect(at(1_000)).toBe(99);
  });

  it('one of perHour(100) spent, then perSecond(2), a finer tick (500 ps to 5 ps): 36 s of debt to wait out', () => {
    const { limiter, at } = switched(perHour(100), 1, perSecond(2));
    expect(limiter.tryAcquire(request)).toMatchObject({ allowed: false, retryAfterMs: 35_500 }); // allowed before the fix
    expect(at(1_000)).toBe(0);
    expect(at(36_500 - 1e-6)).toBe(0);
    expect(at(36_500)).toBe(1); // exact: 7.2e10 ticks of 500 ps are 7.2e12 of 5 ps
    expect(at(37_000 - 1e-6)).toBe(0);
    expect(at(37_000)).toBe(1);
  });
});

// --- PolicyLimiter: lone surrogates in user and api ------------------------------------------

describe('PolicyLimiter.tryAcquire refuses user and api that are not well-formed on their own', () => {
  function limiter() {
    return new PolicyLimiter({ rules: [{ limit: perSecond(1) }], maxKeys: 8, clock: new ManualClock() });
  }

  it('refuses a user ending in a lone high surrogate joined with an api starting with a lone low one', () => {
    const policy = limiter();
    // "2:a\uD800" + "\uDC00b" is the well-formed key "2:a\u{10000}b": it used to pass.
    expect(() => policy.tryAcquire({ user: 'a\uD800', api: '\uDC00b' })).toThrow(TypeError);
    expect(() => policy.tryAcquire({ user: 'a\uD800', api: '\uDC00b' }))
      .toThrow(/^request\.user must be a well-formed string \(no lone surrogates\), got "a\\ud800"$/);
    expect(() => policy.tryAcquire({ user: 'a', api: '\uDC00b' }))
      .toThrow(/^request\.api must be a well-formed string \(no lone surrogates\), got "\\udc00b"$/);
    expect(policy.stats().liveKeys).toBe(0);
  });

  it.each([
    ['user', { user: 'user-\uD800', api: 'search' }, 'request.user'],
    ['user', { user: '\uDC00user', api: 'search' }, 'request.user'],
    ['api', { user: 'alice', api: 'search-\uD800' }, 'request.api'],
    ['api', { user: 'alice', api: '\uDC00' }, 'request.api'],
  ] as [string, PolicyRequest, string][])('names the %s in the error, and acquire() rejects the same way', async (_, request, name) => {
    const policy = limiter();
    expect(() => policy.tryAcquire(request)).toThrow(new RegExp(`^${name.replace('.', '\\.')} must be a well-formed string`));
    await expect(policy.acquire(request)).rejects.toThrow(TypeError);
    expect(policy.stats().liveKeys).toBe(0);
  });

  it('still takes surrogate pairs inside user and api', () => {
    const policy = limiter();
    expect(policy.tryAcquire({ user: '\u{1F600}', api: '\u{10000}' }).allowed).toBe(true);
    expect(policy.tryAcquire({ user: '\u{1F600}', api: '\u{10000}' }).allowed).toBe(false);
  });
});

// --- Found in review of the 64-bit path -------------------------------------------------------

describe('review findings', () => {
  it('a fresh 64-bit key loses under 1 us to the floor: 1e6 per day does not admit 1,000,001 in 86.3 ms', () => {
    let t = 0.1;
    const limiter = new RateLimiter({ limit: { permits: 1e6, periodMs: 86_400_000 }, maxKeys: 4, clock: { now: () => t } });
    expect(limiter.width).toBe(64);
    expect(gcraParams({ permits: 1e6, periodMs: 86_400_000 }).tickPs).toBeLessThanOrEqual(1e6); // 1 us or finer
    expect(limiter.tryAcquire('k', 1e6).allowed).toBe(true);
    t = 86.4; // 86.3 ms later, under one interval (86.4 ms)
    expect(limiter.allow('k')).toBe(false);
    t = 86.5;
    expect(limiter.allow('k')).toBe(true);
  });

  it('PolicyLimiter carries debt across a rule change with 5 and 8 GCRA limits too', () => {
    for (const count of [5, 8]) {
      const clock = new ManualClock(1_000);
      const limits = (first: Limit): Limit[] => [first, ...Array.from({ length: count - 1 }, (_, i) => perDay(1e6 + i))];
      const policy = new PolicyLimiter({ rules: [{ limit: limits(perMinute(60)) }], maxKeys: 8, clock });
      const request = { user: 'u', api: 'a' };
      expect(policy.tryAcquire(request, 60).allowed).toBe(true); // 60 s of debt on the first limit
      policy.setRules([{ limit: limits(perSecond(10)) }]);
      expect(policy.tryAcquire(request).allowed).toBe(false);
      clock.advance(59_000);
      expect(policy.tryAcquire(request).allowed).toBe(false);
      clock.advance(1_100);
      expect(policy.tryAcquire(request).allowed).toBe(true);
    }
  });

  it('PolicyLimiter decodes a state in the ticks it was written in, across rules with as many limits', () => {
    const clock = new ManualClock(1_000);
    const request = { user: 'u', api: 'a' };
    // Two one-limit GCRA rules on very different ticks: the state must be re-expressed, not misread.
    const policy = new PolicyLimiter({ rules: [{ limit: perSecond(3) }], maxKeys: 8, clock });
    expect(policy.tryAcquire(request, 3).allowed).toBe(true); // 1 s of debt in the first rule's ticks
    policy.setRules([{ limit: perDay(86_400, { burst: 1 }) }]); // 1 per second, burst 1
    expect(policy.tryAcquire(request).allowed).toBe(false); // still 1 s of debt
    clock.advance(999);
    expect(policy.tryAcquire(request).allowed).toBe(false);
    clock.advance(2); // the debt, rounded up by a few ticks at most
    expect(policy.tryAcquire(request).allowed).toBe(true);
    expect(policy.tryAcquire(request).allowed).toBe(false);
    clock.advance(10_000);
    expect(policy.sweep()).toBe(1); // idle in its own ticks: reclaimed
  });

  it('a window of 2^21 + 1 ms does not alias after 2^31 windows: the key is fresh again', () => {
    const P = 2 ** 21 + 1;
    for (const algorithm of ['fixed-window', 'sliding-window'] as const) {
      let t = 5 * P;
      const limiter = new RateLimiter({ limit: { permits: 1, periodMs: P }, algorithm, maxKeys: 4, clock: { now: () => t } });
      expect(limiter.allow('k')).toBe(true);
      expect(limiter.allow('k')).toBe(false);
      t = (2 ** 31 + 5) * P;
      expect(t).toBeLessThan(2 ** 53);
      expect(limiter.allow('k')).toBe(true);
    }
  });
});

describe('locked 64-bit states are written whole', () => {
  // Each 64-bit GCRA state under a key lock is written by one 64-bit compareExchange, which needs
  // it 8-byte aligned: mixes of 1-word and 4-word states, after the policy's shape word or not,
  // with a global cap, must all lay out aligned (a misaligned state throws) and count exactly.
  it.each([
    ['32, 64, 32, 64 bits', [perSecond(10), perDay(1e6, { burst: 10 }), perMinute(600), perDay(2e6, { burst: 10 })], undefined],
    ['64 bits and a 64-bit global cap', [perDay(1e6, { burst: 10 })], perDay(3e6, { burst: 25 })],
    ['32 bits and a 64-bit global cap', [perSecond(10)], perDay(3e6, { burst: 25 })],
  ] as [string, Limit[], Limit | undefined][])('RateLimiter, %s', (_, limit, globalLimit) => {
    const clock = new ManualClock(1_000);
    const limiter = new RateLimiter({ limit, ...(globalLimit ? { globalLimit } : {}), maxKeys: 8, clock });
    let admitted = 0;
    for (let i = 0; i < 30; i++) if (limiter.allow('k')) admitted++;
    expect(admitted).toBe(10);
    for (let i = 0; i < 30; i++) if (limiter.allow('j')) admitted++;
    for (let i = 0; i < 30; i++) if (limiter.allow('l')) admitted++;
    expect(admitted).toBe(globalLimit ? 25 : 30); // the cap stops the third key at 5
  });

  it.each([1, 2, 3])('PolicyLimiter with %s 64-bit GCRA limits after its shape word', (count) => {
    const clock = new ManualClock(1_000);
    const limit = [perSecond(10), ...Array.from({ length: count - 1 }, (_, i) => perDay(1e6 + i))];
    const policy = new PolicyLimiter({ rules: [{ limit }], maxKeys: 8, clock });
    let admitted = 0;
    for (let i = 0; i < 30; i++) if (policy.tryAcquire({ user: 'u', api: 'a' }).allowed) admitted++;
    expect(admitted).toBe(10);
  });
});
