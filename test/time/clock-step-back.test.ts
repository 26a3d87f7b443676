// A clock that steps backwards (Date.now() stepped back by NTP, a machine restored from a
// snapshot) never admits more. After a step back, the admissions until the clock is back at its
// old reading, plus those after it, never exceed what the same limits admit on an exactly
// monotone clock: one that reads the running maximum of the readings, so that it stands still
// through the step and moves on once the clock has caught up. No key reads as fresh, and the gap
// is never credited twice.
//
// Deterministic: the clock is a plain variable; two instances over one table stand for two
// threads (each has its own key cache, engine and latest reading).
import { describe, expect, it } from 'vitest';
import {
  ConcurrencyLimiter, perDay, perHour, perSecond, PolicyLimiter, RateLimiter, type Clock, type Limit,
  type PolicyRule, type RateLimiterOptions,
} from '../../src/index.js';
import { STALE_UNIT_MS } from '../../src/time/stamps.js';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** Asks once for `key`; answers the cost admitted (0: refused). */
type Check = (key: string) => number;

/** One configuration over one table: two instances (two threads) and a model on a monotone clock. */
interface Subjects {
  /** The instance that spends the key before the step back. */
  a: Check;
  /** Another instance over the same table. */
  b: Check;
  /** The same limits on their own table, on the running maximum of the readings. */
  model: Check;
}

/**
 * What a key's staleness stamp counts in: seconds (a step back of 2^30 s or more, 34 years, is
 * told from a long idle only by the instance that read the later time), 64-bit staleness units
 * (only a step back of 2^30 units, 139,000 years, is), or nothing (a 64-bit TAT of ticks of 1 us
 * or more cannot wrap: every step is told by every instance).
 */
type Stamp = 'seconds' | 'units' | 'none';

interface Config {
  name: string;
  make(clock: Clock, modelClock: Clock): Subjects;
  /** One tick of its finest time word. */
  tickMs: number;
  /** Just over half the range its time words decode (past it, a 32-bit difference wraps). */
  halfRangeMs: number;
  /** How long a spent key takes to recover completely. */
  recoverMs: number;
  /** Requests per round: more than the key can take at once. */
  attempts: number;
  stamp: Stamp;
}

function rate(name: string, options: Omit<RateLimiterOptions, 'maxKeys' | 'clock'>, more: Omit<Config, 'name' | 'make'> & { width?: 32 | 64 | null; cost?: number }): Config {
  const cost = more.cost ?? 1;
  return {
    name, ...more,
    make(clock, modelClock) {
      const a = new RateLimiter({ maxKeys: 16, clock, ...options });
      const b = RateLimiter.attach(a.handle, { clock });
      const model = new RateLimiter({ maxKeys: 16, clock: modelClock, ...options });
      if (more.width !== undefined) expect(a.width).toBe(more.width);
      const check = (l: RateLimiter): Check => (key) => (l.allow(key, cost) ? cost : 0);
      return { a: check(a), b: check(b), model: check(model) };
    },
  };
}

function policy(name: string, rules: PolicyRule[], more: Omit<Config, 'name' | 'make'>): Config {
  return {
    name, ...more,
    make(clock, modelClock) {
      const a = new PolicyLimiter({ rules, maxKeys: 16, clock });
      const b = PolicyLimiter.attach(a.handle, { clock });
      const model = new PolicyLimiter({ rules, maxKeys: 16, clock: modelClock });
      const check = (l: PolicyLimiter): Check => (key) => (l.allow({ user: key, api: 'api' }) ? 1 : 0);
      return { a: check(a), b: check(b), model: check(model) };
    },
  };
}

/** Leases of 30 s, never released: they free only by expiry. */
function leases(): Config {
  const make = (clock: Clock): ConcurrencyLimiter => new ConcurrencyLimiter({ maxInFlight: 10, leaseMs: 30_000, maxKeys: 16, clock });
  return {
    name: 'ConcurrencyLimiter (10 places, leases of 30 s)',
    tickMs: 0.001, halfRangeMs: 2 ** 31 * 0.001 + SECOND, recoverMs: 30_000, attempts: 12, stamp: 'seconds',
    make(clock, modelClock) {
      const a = make(clock);
      const b = ConcurrencyLimiter.attach(a.handle, { clock });
      const model = make(modelClock);
      const check = (l: ConcurrencyLimiter): Check => (key) => (l.tryAcquire(key).allowed ? 1 : 0);
      return { a: check(a), b: check(b), model: check(model) };
    },
  };
}

const TWO_31_SECONDS = 2 ** 31 * SECOND + SECOND;

const CONFIGS: Config[] = [
  rate('GCRA, one limit, width 32 (ticks of 10 ns)', { limit: perSecond(100) }, {
    width: 32, tickMs: 1e-5, halfRangeMs: 2 ** 31 * 1e-5 + SECOND, recoverMs: SECOND, attempts: 110, stamp: 'seconds',
  }),
  rate('GCRA, one limit, width 32 (perDay: ticks of 1 ms)', { limit: perDay(100) }, {
    width: 32, tickMs: 1, halfRangeMs: 2 ** 31 + SECOND, recoverMs: DAY, attempts: 110, stamp: 'seconds',
  }),
  rate('GCRA, one limit, width 64 (a million a day: ticks of 1 us, no staleness word)', { limit: { permits: 1e6, periodMs: DAY } }, {
    width: 64, cost: 10_000, tickMs: 0.001, halfRangeMs: TWO_31_SECONDS, recoverMs: DAY, attempts: 110, stamp: 'none',
  }),
  rate('GCRA, one limit, width 64 (ticks of 1 ns, a staleness unit)', { limit: { permits: 1e9, periodMs: SECOND } }, {
    width: 64, cost: 10_000_000, tickMs: 1e-6, halfRangeMs: 2 ** 63 * 1e-6 + SECOND, recoverMs: SECOND, attempts: 110, stamp: 'units',
  }),
  rate('GCRA, two limits, width 32 (lock-free engine)', { limit: [perSecond(100), perHour(1000)] }, {
    width: null, tickMs: 1e-5, halfRangeMs: 2 ** 31 * 0.01 + SECOND, recoverMs: HOUR, attempts: 110, stamp: 'seconds',
  }),
  rate('GCRA, two limits, width 64', { limit: [{ permits: 1e9, periodMs: SECOND }, { permits: 2e9, periodMs: 2 * SECOND, burst: 1.5e9 }] }, {
    width: null, cost: 10_000_000, tickMs: 1e-6, halfRangeMs: 2 ** 63 * 1e-6 + SECOND, recoverMs: 2 * SECOND, attempts: 110, stamp: 'units',
  }),
  rate('GCRA with a global cap', { limit: perSecond(1000), globalLimit: perSecond(100) }, {
    width: null, tickMs: 1e-5, halfRangeMs: 2 ** 31 * 1e-5 + SECOND, recoverMs: SECOND, attempts: 110, stamp: 'seconds',
  }),
  rate('GCRA with a global cap served in batches', { limit: perSecond(1e6), globalLimit: perSecond(1e5, { burst: 1000 }) }, {
    width: null, tickMs: 1e-5, halfRangeMs: 2 ** 31 * 1e-5 + SECOND, recoverMs: 10, attempts: 1100, stamp: 'seconds',
  }),
  rate('fixed window (one int32 word)', { limit: perSecond(100), algorithm: 'fixed-window' }, {
    width: null, tickMs: 0.001, halfRangeMs: Math.ceil(2 ** 31 / 101) * SECOND + SECOND, recoverMs: SECOND, attempts: 110, stamp: 'seconds',
  }),
  rate('fixed window of an hour', { limit: perHour(100), algorithm: 'fixed-window' }, {
    width: null, tickMs: 0.001, halfRangeMs: Math.ceil(2 ** 31 / 101) * HOUR + SECOND, recoverMs: HOUR, attempts: 110, stamp: 'seconds',
  }),
  rate('sliding window', { limit: perSecond(100), algorithm: 'sliding-window' }, {
    width: null, tickMs: 0.001, halfRangeMs: 2 ** 19 * SECOND + SECOND, recoverMs: 2 * SECOND, attempts: 110, stamp: 'seconds',
  }),
  rate('sliding log (locked engine)', { limit: perSecond(100), algorithm: 'sliding-log' }, {
    width: null, tickMs: 1e-5, halfRangeMs: 2 ** 31 * 1e-5 + SECOND, recoverMs: SECOND, attempts: 110, stamp: 'seconds',
  }),
  policy('PolicyLimiter, GCRA (64-bit states, ticks of 1 us)', [{ limit: perSecond(100) }], {
    tickMs: 0.001, halfRangeMs: TWO_31_SECONDS, recoverMs: SECOND, attempts: 110, stamp: 'none',
  }),
  policy('PolicyLimiter, fixed window', [{ limit: perSecond(100), algorithm: 'fixed-window' }], {
    tickMs: 0.001, halfRangeMs: Math.ceil(2 ** 31 / 101) * SECOND + SECOND, recoverMs: SECOND, attempts: 110, stamp: 'seconds',
  }),
  leases(),
];

/**
 * How the key is asked after the step back:
 * - 'same': by the instance that spent it (it read the later time itself);
 * - 'other': by another instance with no reading of its own;
 * - 'other-seen': by another instance that admitted the key once shortly before the step back's
 *   landing point, in the same second: its own latest reading is no later than where the clock
 *   lands, so it cannot tell from its own readings that the clock went back.
 */
type Mode = 'same' | 'other' | 'other-seen';

interface Step {
  label: string;
  ms: number;
  /** Only the instance that read the later time can tell this step from a long idle. */
  sameOnly?: boolean;
}

function steps(c: Config): Step[] {
  const list: Step[] = [
    { label: 'one tick', ms: c.tickMs },
    { label: '5 s', ms: 5 * SECOND },
    { label: 'just over half the decode range', ms: c.halfRangeMs, sameOnly: c.stamp === 'seconds' && c.halfRangeMs >= 2 ** 30 * SECOND },
    { label: '60 s', ms: MINUTE },
    { label: '1 h', ms: HOUR },
    { label: '30 days', ms: 30 * DAY },
    { label: 'past 2^31 s', ms: TWO_31_SECONDS, sameOnly: c.stamp === 'seconds' },
  ];
  if (c.stamp === 'units') list.push({ label: 'past 2^31 staleness units', ms: (2 ** 31 + 1) * STALE_UNIT_MS, sameOnly: true });
  return list;
}

/** A start time a few seconds into some second (or on its boundary), with room for the step. */
function startFor(backMs: number, offsetMs: number): number {
  const t = Math.ceil((backMs + 2e9) / SECOND) * SECOND;
  // Readings past 2^52 ms are whole numbers: keep the offset one.
  return t + (t >= 2 ** 52 ? Math.round(offsetMs) : offsetMs);
}

/**
 * Spends the key at T0, steps the clock back by `backMs`, then walks it forward past T0 and on
 * until the key has recovered, asking the key `attempts` times at each stop. At every stop the
 * admissions so far must not exceed the model's; the last stop must admit something (the key
 * recovers once the clock has caught up).
 */
function scenario(c: Config, backMs: number, mode: Mode, offsetMs: number): void {
  const t0 = startFor(backMs, offsetMs);
  const back = t0 - backMs;
  const first = mode === 'other-seen' ? back - 0.25 : t0;
  let t = first;
  let modelT = first;
  const clock = { now: (): number => t };
  const modelClock = { now: (): number => modelT };
  const at = (ms: number): void => {
    t = ms;
    modelT = Math.max(modelT, ms);
  };
  const s = c.make(clock, modelClock);
  const asker = mode === 'same' ? s.a : s.b;
  let admitted = 0;
  let allowed = 0;
  let last = 0;
  const round = (who: Check, label: string): void => {
    let got = 0;
    for (let i = 0; i < c.attempts; i++) {
      got += who('k');
      allowed += s.model('k');
    }
    admitted += got;
    last = got;
    expect(admitted, `${label} (t = T0 ${t - t0 >= 0 ? '+' : '-'} ${Math.abs(t - t0)} ms): admitted ${admitted} in all, a monotone clock ${allowed}`).toBeLessThanOrEqual(allowed);
  };
  if (mode === 'other-seen') {
    at(back - 0.25);
    round(s.b, 'the other instance, before');
  }
  at(t0);
  round(s.a, 'spent');
  expect(admitted).toBeGreaterThan(0);
  at(back);
  round(asker, 'stepped back');
  const stops = [back + backMs / 4, back + backMs / 2, t0 - c.tickMs, t0, t0 + c.recoverMs / 4, t0 + c.recoverMs / 2, t0 + c.recoverMs * 1.01, t0 + c.recoverMs * 3];
  let prev = back;
  for (const stop of stops) {
    if (!(stop > prev)) continue;
    prev = stop;
    at(stop);
    round(asker, 'walking forward');
  }
  expect(last, 'the key recovers once the clock has caught up').toBeGreaterThan(0);
}

describe('a clock that steps backwards never admits more', () => {
  for (const c of CONFIGS) {
    describe(c.name, () => {
      for (const mode of ['same', 'other', 'other-seen'] as const) {
        const table = steps(c).filter((s) => mode === 'same' || s.sameOnly !== true).map((s) => [s.label, s] as const);
        // From a second's boundary (the smallest step crosses into the second before) and from
        // inside one; 'other-seen' needs room in its second for the other instance's admission.
        const from = mode === 'other-seen' ? 'from inside a second' : 'from a second\'s boundary and from inside one';
        it.each(table)(`${mode} instance, step back of %s, ${from}`, (_, step) => {
          if (mode !== 'other-seen') scenario(c, step.ms, mode, 0);
          scenario(c, step.ms, mode, 2_500.5);
        });
      }
    });
  }
});

describe('the gap is never credited twice', () => {
  const limits: [string, Omit<RateLimiterOptions, 'maxKeys' | 'clock'>, number][] = [
    ['GCRA, width 32', { limit: perSecond(10) }, 1],
    ['GCRA, width 64', { limit: { permits: 1e6, periodMs: DAY } }, 10_000],
    ['GCRA, two limits', { limit: [perSecond(10), perHour(1000)] }, 1],
    ['fixed window', { limit: perSecond(10), algorithm: 'fixed-window' }, 1],
    ['sliding window', { limit: perSecond(10), algorithm: 'sliding-window' }, 1],
    ['sliding log', { limit: perSecond(10), algorithm: 'sliding-log' }, 1],
  ];
  it.each(limits)('%s: spent at T0, back an hour, forward to T0: nothing more at T0, on either instance', (_, options, cost) => {
    const t0 = 5e9 + 400;
    let t = t0;
    const clock = { now: (): number => t };
    const a = new RateLimiter({ maxKeys: 4, clock, ...options });
    const b = RateLimiter.attach(a.handle, { clock });
    const burst = (l: RateLimiter): number => {
      let n = 0;
      for (let i = 0; i < 2 ** 12 && l.allow('k', cost); i++) n++;
      return n;
    };
    expect(burst(a)).toBeGreaterThan(0);
    t = t0 - HOUR;
    expect(burst(a) + burst(b)).toBe(0);
    t = t0;
    expect(burst(b) + burst(a)).toBe(0);
  });
});

describe('sweep() after a step back', () => {
  it.each([
    ['GCRA, width 32', { limit: perSecond(10) }],
    ['GCRA, two limits', { limit: [perSecond(10), perHour(100)] }],
    ['fixed window', { limit: perSecond(10), algorithm: 'fixed-window' }],
    ['sliding log', { limit: perSecond(10), algorithm: 'sliding-log' }],
  ] as [string, Omit<RateLimiterOptions, 'maxKeys' | 'clock'>][])('%s: reclaims no key that is still spent (a reclaimed key would start fresh)', (_, options) => {
    const t0 = 5e9;
    let t = t0;
    const clock = { now: (): number => t };
    const a = new RateLimiter({ maxKeys: 4, clock, ...options });
    while (a.allow('k'));
    for (const back of [HOUR, 30 * DAY]) {
      t = t0 - back;
      const b = RateLimiter.attach(a.handle, { clock });
      expect(b.sweep()).toBe(0);
      expect(b.allow('k')).toBe(false);
    }
  });

  it('ConcurrencyLimiter: reclaims no key whose leases have not expired, and frees none early', () => {
    const t0 = 5e9;
    let t = t0;
    const clock = { now: (): number => t };
    const a = new ConcurrencyLimiter({ maxInFlight: 3, leaseMs: 10_000, maxKeys: 4, clock });
    for (let i = 0; i < 3; i++) expect(a.tryAcquire('k').allowed).toBe(true);
    for (const back of [SECOND, HOUR, 30 * DAY]) {
      t = t0 - back;
      const b = ConcurrencyLimiter.attach(a.handle, { clock });
      expect(b.sweep()).toBe(0);
      expect(b.stats().placesHeld).toBe(3);
      expect(b.tryAcquire('k')).toMatchObject({ allowed: false, remaining: 0 });
      expect(a.tryAcquire('k').allowed).toBe(false);
    }
    t = t0 + 10_000;
    expect(a.tryAcquire('k').allowed).toBe(true); // expired by the clock, once it has caught up
  });
});

describe('reservations and waits after a step back', () => {
  const configs: [string, Omit<RateLimiterOptions, 'maxKeys' | 'clock'>, number][] = [
    ['GCRA, width 32', { limit: perSecond(10) }, 1],
    ['GCRA, width 64', { limit: { permits: 1e6, periodMs: DAY } }, 10_000],
    ['GCRA, two limits', { limit: [perSecond(10), perHour(1000)] }, 1],
    ['GCRA with a global cap', { limit: perSecond(100), globalLimit: perSecond(10) }, 1],
    ['fixed window', { limit: perSecond(10), algorithm: 'fixed-window' }, 1],
  ];
  it.each(configs)('%s: a reservation made behind the key\'s latest admission acts no earlier than on a monotone clock', (_, options, cost) => {
    const t0 = 5e9 + 200;
    let t = t0;
    const clock = { now: (): number => t };
    const modelClock = { now: (): number => t0 };
    const a = new RateLimiter({ maxKeys: 4, clock, ...options });
    const model = new RateLimiter({ maxKeys: 4, clock: modelClock, ...options });
    while (a.allow('k', cost));
    while (model.allow('k', cost));
    for (const back of [0.5, 700, 5 * SECOND]) {
      t = t0 - back;
      const mine = RateLimiter.attach(a.handle, { clock }).reserve('k', { cost, maxWaitMs: HOUR });
      const theirs = model.reserve('k', { cost, maxWaitMs: HOUR });
      // Both count one request; ours may not act before the model's would, measured either way.
      expect(mine.actAtMs).toBeGreaterThanOrEqual(theirs.actAtMs);
      expect(t + mine.delayMs).toBeGreaterThanOrEqual(theirs.actAtMs - 1e-6);
    }
  });

  it('tryAcquire on a key spent at a later time reports a wait that reaches past the clock catching up', () => {
    const t0 = 5e9;
    let t = t0;
    const clock = { now: (): number => t };
    const a = new RateLimiter({ maxKeys: 4, clock, limit: perSecond(10) });
    while (a.allow('k'));
    t = t0 - 30 * SECOND;
    const d = RateLimiter.attach(a.handle, { clock }).tryAcquire('k');
    expect(d.allowed).toBe(false);
    expect(t + d.retryAfterMs).toBeGreaterThanOrEqual(t0);
    expect(a.tryAcquire('k')).toMatchObject({ allowed: false });
    expect(t + a.tryAcquire('k').retryAfterMs).toBeGreaterThanOrEqual(t0);
  });
});

describe('several limits and rules: each limit keeps what it counted', () => {
  it('a key limited by its hourly limit stays limited after a step back of a day', () => {
    const limit: Limit[] = [perSecond(100), perHour(150)];
    const t0 = 5e9;
    let t = t0;
    const clock = { now: (): number => t };
    const a = new RateLimiter({ maxKeys: 4, clock, limit });
    let n = 0;
    for (let s = 0; s < 3; s++, t += SECOND) while (a.allow('k')) n++;
    expect(n).toBe(150);
    t = t0 - DAY;
    const b = RateLimiter.attach(a.handle, { clock });
    for (let i = 0; i < 200; i++) expect(b.allow('k') || a.allow('k')).toBe(false);
  });
});
