import { describe, expect, it } from 'vitest';
import {
  ConcurrencyLimiter, type ConcurrencyLimiterOptions, type LeaseDecision,
} from '../../src/concurrency/concurrency-limiter.js';
import { ManualClock, perSecond, RateLimiter } from '../../src/index.js';

import { openGate, result, spawn } from '../helpers/workers.js';

function fresh(extra: Partial<ConcurrencyLimiterOptions> = {}) {
  const clock = new ManualClock(1_000);
  const limiter = new ConcurrencyLimiter({ maxInFlight: 3, leaseMs: 1_000, maxKeys: 8, clock, ...extra });
  return { clock, limiter };
}

/** The decision without its lease, for toEqual. */
function plain(d: LeaseDecision) {
  const { lease, ...rest } = d;
  return { ...rest, lease: lease === null ? null : { key: lease.key, cost: lease.cost, expiresAtMs: lease.expiresAtMs } };
}

describe('tryAcquire()', () => {
  it('admits maxInFlight leases, then refuses with exact remaining, retryAfterMs and resetAfterMs', () => {
    const { clock, limiter } = fresh();
    expect(plain(limiter.tryAcquire('k'))).toEqual({
      allowed: true, remaining: 2, retryAfterMs: 0, resetAfterMs: 1_000, reason: 'allowed',
      lease: { key: 'k', cost: 1, expiresAtMs: 2_000 },
    });
    clock.advance(100);
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 1, resetAfterMs: 1_000 });
    clock.advance(100);
    expect(limiter.tryAcquire('k').lease?.expiresAtMs).toBe(2_200);
    clock.advance(100); // t = 1300; leases expire at 2000, 2100, 2200
    expect(plain(limiter.tryAcquire('k'))).toEqual({
      allowed: false, remaining: 0, retryAfterMs: 700, resetAfterMs: 900, reason: 'limited', lease: null,
    });
    expect(limiter.tryAcquire('k', 2)).toMatchObject({ allowed: false, retryAfterMs: 800 }); // two must expire
    expect(limiter.tryAcquire('k', 3)).toMatchObject({ allowed: false, retryAfterMs: 900 });
    expect(limiter.tryAcquire('other', 3)).toMatchObject({ allowed: true, remaining: 0 }); // keys are independent
  });

  it('retryAfterMs is exact when nobody releases: the request passes then, not a microsecond before', () => {
    const { clock, limiter } = fresh({ leaseMs: 250.5 });
    for (let i = 0; i < 3; i++) {
      expect(limiter.tryAcquire('k').allowed).toBe(true);
      clock.advance(10.25);
    }
    const d = limiter.tryAcquire('k', 2);
    expect(d.retryAfterMs).toBeCloseTo(250.5 + 10.25 - 3 * 10.25, 9);
    clock.advance(d.retryAfterMs - 0.001);
    expect(limiter.tryAcquire('k', 2).allowed).toBe(false);
    clock.advance(0.001);
    expect(limiter.tryAcquire('k', 2)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('cost takes that many places; cost > maxInFlight can never pass; cost 0 is a probe', () => {
    const { limiter } = fresh();
    const two = limiter.tryAcquire('k', 2);
    expect(two).toMatchObject({ allowed: true, remaining: 1 });
    expect(two.lease?.cost).toBe(2);
    expect(limiter.tryAcquire('k', 2)).toMatchObject({ allowed: false, remaining: 1, reason: 'limited', retryAfterMs: 1_000 });
    expect(plain(limiter.tryAcquire('k', 4))).toEqual({
      allowed: false, remaining: 1, retryAfterMs: Infinity, resetAfterMs: 1_000, reason: 'exceeds-burst', lease: null,
    });
    expect(plain(limiter.tryAcquire('k', 0))).toEqual({
      allowed: true, remaining: 1, retryAfterMs: 0, resetAfterMs: 1_000, reason: 'allowed', lease: null,
    });
    expect(two.lease?.release()).toBe(true);
    expect(limiter.tryAcquire('k', 0)).toMatchObject({ remaining: 3, resetAfterMs: 0 });
    expect(limiter.tryAcquire('k', 3).allowed).toBe(true);
  });
});

describe('Lease', () => {
  it('release frees its places at once; a second release returns false and frees nothing', () => {
    const { limiter } = fresh();
    const a = limiter.tryAcquire('k').lease;
    const b = limiter.tryAcquire('k', 2).lease;
    expect(limiter.tryAcquire('k').allowed).toBe(false);
    expect(b?.release()).toBe(true);
    expect(limiter.tryAcquire('k', 0).remaining).toBe(2);
    const c = limiter.tryAcquire('k', 2).lease; // takes b's old places
    expect(c).not.toBeNull();
    expect(b?.release()).toBe(false); // idempotent: does not free c's places
    expect(limiter.tryAcquire('k', 0).remaining).toBe(0);
    expect(a?.release()).toBe(true);
    expect(c?.release()).toBe(true);
    expect(limiter.tryAcquire('k', 0).remaining).toBe(3);
  });

  it('a `using` block releases the lease at the end of the scope', () => {
    const { limiter } = fresh();
    {
      using lease = limiter.tryAcquire('k', 3).lease;
      expect(lease?.cost).toBe(3);
      expect(limiter.tryAcquire('k').allowed).toBe(false);
    }
    expect(limiter.tryAcquire('k', 0).remaining).toBe(3);
    {
      using refused = limiter.tryAcquire('k', 4).lease; // null is allowed in `using`
      expect(refused).toBeNull();
    }
  });

  it('[Symbol.dispose]() is release()', () => {
    const { limiter } = fresh();
    const lease = limiter.tryAcquire('k', 2).lease;
    lease?.[Symbol.dispose]();
    expect(limiter.tryAcquire('k', 0).remaining).toBe(3);
    expect(lease?.release()).toBe(false);
  });

  it('expires after leaseMs: its places are free at expiresAtMs, not a microsecond before', () => {
    const { clock, limiter } = fresh({ leaseMs: 500 });
    const lease = limiter.tryAcquire('k', 3).lease;
    expect(lease?.expiresAtMs).toBe(1_500);
    clock.set(1_499.999);
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 0.001, resetAfterMs: 0.001 });
    clock.set(1_500);
    expect(limiter.tryAcquire('k', 0)).toMatchObject({ remaining: 3, resetAfterMs: 0 });
    expect(lease?.release()).toBe(false); // already expired
  });

  it('release() of a lease already expired, with nothing in between, returns false and frees nothing', () => {
    const { clock, limiter } = fresh({ leaseMs: 500 });
    const expired = limiter.tryAcquire('k', 2).lease;
    const held = limiter.tryAcquire('k', 1).lease;
    clock.set(1_500); // both expire now; no call has looked at the key since
    expect(expired?.release()).toBe(false);
    expect(held?.release()).toBe(false);
    expect(limiter.tryAcquire('k', 0).remaining).toBe(3);
    const next = limiter.tryAcquire('k', 3).lease; // every place is free, once each
    expect(next).not.toBeNull();
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: false });
  });

  it('a release after expiry and reuse does not free the new lease\'s place', () => {
    const { clock, limiter } = fresh({ maxInFlight: 1, leaseMs: 100 });
    const old = limiter.tryAcquire('k').lease;
    clock.advance(100);
    const next = limiter.tryAcquire('k').lease; // the same place, now the new lease's
    expect(next).not.toBeNull();
    expect(old?.release()).toBe(false);
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 100 });
    expect(next?.release()).toBe(true);
    expect(limiter.tryAcquire('k').allowed).toBe(true);
  });

  it('a release after the key was reclaimed and its slot reused by another key frees nothing there', () => {
    const { clock, limiter } = fresh({ maxInFlight: 2, leaseMs: 100, maxKeys: 1, forceHash: 7 }); // 2 slots, one chain
    const old = limiter.tryAcquire('a', 2).lease;
    expect(limiter.tryAcquire('b', 1).allowed).toBe(true);
    clock.advance(100);
    expect(limiter.sweep()).toBe(2); // both expired: both keys reclaimed
    const taken = limiter.tryAcquire('c', 2).lease; // reuses the first slot of the chain: a's
    expect(taken).not.toBeNull();
    expect(old?.release()).toBe(false);
    expect(limiter.tryAcquire('c', 0).remaining).toBe(0);
  });
});

describe('long idle keys and 32-bit stamps', () => {
  const WRAP_MS = 2 ** 32 / 1_000; // 2^32 ticks of 1 us

  it('a lease never released does not come back when its stamp wraps around', () => {
    const { clock, limiter } = fresh({ leaseMs: 1_000 });
    limiter.tryAcquire('k', 3);
    clock.advance(WRAP_MS); // the stamp now reads as 1000 ms ahead again, but lastSec is stale
    expect(limiter.tryAcquire('k', 0)).toMatchObject({ remaining: 3, resetAfterMs: 0 });
    expect(limiter.stats().placesHeld).toBe(0);
  });

  it('nor while other leases keep the key busy: acquires clear expired places', () => {
    const { clock, limiter } = fresh({ maxInFlight: 2, leaseMs: 1_000 });
    const start = clock.now();
    const first = limiter.tryAcquire('k').lease; // place 0
    limiter.tryAcquire('k'); // place 1, never released
    first?.release(); // from now on, acquires take place 0 and only look at place 1
    for (let t = 2_000; t < WRAP_MS; t += 2_000) { // more often than staleSec (3 s): lastSec stays fresh
      clock.set(start + t);
      limiter.tryAcquire('k').lease?.release();
    }
    clock.set(start + WRAP_MS + 500); // the leaked stamp would read as 500 ms ahead
    expect(limiter.tryAcquire('k', 0).remaining).toBe(2);
  });
});

describe('a full table', () => {
  function full(onFull: 'deny' | 'allow') {
    const { limiter } = fresh({ maxKeys: 1, forceHash: 3, onFull });
    limiter.tryAcquire('a');
    limiter.tryAcquire('b');
    return limiter;
  }

  it("onFull 'deny' refuses a new key while every slot holds a lease", () => {
    expect(plain(full('deny').tryAcquire('c'))).toEqual({
      allowed: false, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, reason: 'table-full', lease: null,
    });
  });

  it("onFull 'allow' lets it through with an untracked lease", () => {
    const d = full('allow').tryAcquire('c', 2);
    expect(d).toMatchObject({ allowed: true, reason: 'table-full' });
    expect(d.lease).toMatchObject({ key: 'c', cost: 2, expiresAtMs: 2_000 });
    expect(d.lease?.release()).toBe(true);
    expect(d.lease?.release()).toBe(false);
  });
});

describe('sweep() and stats()', () => {
  it('reclaims exactly the keys that hold no unexpired lease', () => {
    // Every key hashes alike: 'released', 'expired' and 'held' fill the home slot and the two after it.
    const { clock, limiter } = fresh({ leaseMs: 100, forceHash: 3 });
    limiter.tryAcquire('released').lease?.release();
    limiter.tryAcquire('expired', 2);
    clock.advance(50);
    const held = limiter.tryAcquire('held', 2).lease;
    clock.advance(50);
    expect(limiter.stats()).toMatchObject({ liveKeys: 3, maxKeys: 8, capacity: 16, tombstones: 0, claimed: 0, placesHeld: 2 });
    expect(limiter.sweep()).toBe(2);
    // 'held' is found past the two reclaimed slots: they stay tombstones.
    expect(limiter.stats()).toMatchObject({ liveKeys: 1, tombstones: 2, placesHeld: 2 });
    expect(limiter.tryAcquire('held', 0).remaining).toBe(1);
    expect(held?.release()).toBe(true);
    expect(limiter.sweep()).toBe(1);
    // No key is left whose lookup passes them: all three are EMPTY again.
    expect(limiter.stats()).toMatchObject({ liveKeys: 0, tombstones: 0 });
    expect(limiter.stats().tableBytes).toBe(new Int32Array(limiter.handle.table).byteLength);
  });
});

describe('options and arguments', () => {
  const base = { maxInFlight: 3, leaseMs: 1_000, maxKeys: 8 };
  it.each([
    [{ ...base, maxInFlight: 0 }, RangeError, /options\.maxInFlight must be an integer from 1 to 1024, got 0/],
    [{ ...base, maxInFlight: 1025 }, RangeError, /options\.maxInFlight .* got 1025/],
    [{ ...base, maxInFlight: 2.5 }, RangeError, /options\.maxInFlight .* got 2\.5/],
    [{ ...base, maxInFlight: '3' }, TypeError, /options\.maxInFlight must be an integer, got "3"/],
    [{ ...base, maxInFlight: undefined }, TypeError, /options\.maxInFlight must be an integer, got undefined/],
    [{ ...base, leaseMs: 0 }, RangeError, /options\.leaseMs must be a positive finite number, got 0/],
    [{ ...base, leaseMs: -1 }, RangeError, /options\.leaseMs .* got -1/],
    [{ ...base, leaseMs: Infinity }, RangeError, /options\.leaseMs .* got Infinity/],
    [{ ...base, leaseMs: NaN }, RangeError, /options\.leaseMs .* got NaN/],
    [{ ...base, leaseMs: 1e15 }, RangeError, /options\.leaseMs must be at most 536870912000 .* got 1000000000000000/],
    [{ ...base, leaseMs: '5' }, TypeError, /options\.leaseMs must be a number, got "5"/],
    [{ ...base, maxKeys: 0 }, RangeError, /options\.maxKeys must be an integer from 1 to 4194304, got 0/],
    [{ ...base, maxKeyBytes: 65_537 }, RangeError, /options\.maxKeyBytes .* got 65537/],
    [{ ...base, claimTimeoutMs: 0 }, RangeError, /options\.claimTimeoutMs .* got 0/],
    [{ ...base, onFull: 'drop' }, RangeError, /options\.onFull must be 'deny' or 'allow', got "drop"/],
    [{ ...base, hashSeed: 1.5 }, RangeError, /options\.hashSeed .* got 1\.5/],
    [{ ...base, forceHash: 'x' }, TypeError, /options\.forceHash must be an integer, got "x"/],
    [{ ...base, clock: { now: 5 } }, TypeError, /options\.clock must be an object with a now\(\) method, got an object/],
    [{ ...base, cacheSize: -1 }, RangeError, /options\.cacheSize .* got -1/],
    [null, TypeError, /options must be an object like \{ maxInFlight, leaseMs, maxKeys \}, got null/],
  ])('rejects %j', (options, type, message) => {
    expect(() => new ConcurrencyLimiter(options as never)).toThrow(type);
    expect(() => new ConcurrencyLimiter(options as never)).toThrow(message);
  });

  it('accepts leases from a microsecond to years, rounding up to whole ticks', () => {
    const clock = new ManualClock();
    const tiny = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 0.0004, maxKeys: 1, clock });
    expect(tiny.tryAcquire('k').lease?.expiresAtMs).toBe(0.001);
    const year = 365 * 86_400_000;
    const long = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: year, maxKeys: 1, clock });
    expect(long.tryAcquire('k')).toMatchObject({ allowed: true, resetAfterMs: year });
    clock.advance(year - 1);
    expect(long.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 1 });
    clock.advance(1);
    expect(long.tryAcquire('k').allowed).toBe(true);
  });

  it.each([
    [123, TypeError, /key must be a non-empty string, got 123/],
    ['', TypeError, /key must be a non-empty string, got ""/],
    ['x'.repeat(4097), RangeError, /key must be at most 4096 UTF-8 bytes \(option maxKeyBytes\)/],
  ])('rejects key %j and changes nothing', (key, type, message) => {
    const { limiter } = fresh();
    limiter.tryAcquire('a', 2);
    expect(() => limiter.tryAcquire(key as string)).toThrow(type);
    expect(() => limiter.tryAcquire(key as string)).toThrow(message);
    expect(limiter.tryAcquire('a', 0).remaining).toBe(1);
    expect(limiter.stats().liveKeys).toBe(1);
  });

  it.each([[-1, RangeError], [1.5, RangeError], [NaN, RangeError], ['1', TypeError]])('rejects cost %s', (cost, type) => {
    const { limiter } = fresh();
    expect(() => limiter.tryAcquire('a', cost as number)).toThrow(type);
    expect(() => limiter.tryAcquire('a', cost as number)).toThrow(/cost must be an integer from 0 to 2\^53 - 1 \(Number.MAX_SAFE_INTEGER\), got/);
    expect(limiter.tryAcquire('a', 0).remaining).toBe(3);
  });
});

describe('handle and attach()', () => {
  it('is structured-cloneable; an attached instance shares the state and the ManualClock', () => {
    const { clock, limiter } = fresh();
    const lease = limiter.tryAcquire('k', 2).lease;
    const other = ConcurrencyLimiter.attach(structuredClone(limiter.handle));
    expect(limiter.handle.kind).toBe('sluice.ConcurrencyLimiter');
    expect([other.maxInFlight, other.leaseMs]).toEqual([3, 1_000]);
    expect(other.tryAcquire('k', 2)).toMatchObject({ allowed: false, remaining: 1, retryAfterMs: 1_000 });
    clock.advance(400);
    expect(other.tryAcquire('k', 2)).toMatchObject({ allowed: false, retryAfterMs: 600 });
    expect(lease?.release()).toBe(true);
    expect(other.tryAcquire('k', 3).allowed).toBe(true);
  });

  it('needs a custom clock again, and refuses what is not its handle', () => {
    const clock = { now: () => 5 };
    const limiter = new ConcurrencyLimiter({ maxInFlight: 2, leaseMs: 10, maxKeys: 4, clock });
    expect(() => ConcurrencyLimiter.attach(limiter.handle)).toThrow(/custom clock: pass it as ConcurrencyLimiter\.attach\(handle, \{ clock \}\)/);
    expect(ConcurrencyLimiter.attach(limiter.handle, { clock }).tryAcquire('k')).toMatchObject({ allowed: true, remaining: 1 });
    expect(() => ConcurrencyLimiter.attach(null as never)).toThrow(/handle must be a ConcurrencyLimiter handle/);
    expect(() => ConcurrencyLimiter.attach(limiter.handle, { cacheSize: -1 })).toThrow(RangeError);
    const rate = new RateLimiter({ limit: perSecond(5), maxKeys: 4 });
    // Every class checks a handle the same way: its kind first, then (a kind lost on the way) its table.
    expect(() => ConcurrencyLimiter.attach(rate.handle as never)).toThrow(/handle is a "sluice.RateLimiter" handle, not a ConcurrencyLimiter's/);
    expect(() => ConcurrencyLimiter.attach({ ...rate.handle, kind: undefined } as never)).toThrow(/made by a RateLimiter, not a ConcurrencyLimiter/);
    expect(() => RateLimiter.attach(limiter.handle as never, { clock })).toThrow(TypeError);
  });
});




type HoldResult = { now: number; decisions: { allowed: boolean; remaining: number; expiresAtMs: number | null }[] };

describe('worker_threads', () => {
  it('a worker attached on a shared ManualClock holds leases here; killed, they come back after leaseMs, not before', async () => {
    const { clock, limiter } = fresh({ maxInFlight: 3, leaseMs: 2_000 });
    clock.set(5_000);
    const worker = spawn({ mode: 'lease-hold', handle: limiter.handle, id: 0, key: 'k', count: 2, cost: 1 });
    const { now, decisions } = await result<HoldResult>(worker);
    expect(now).toBe(5_000);
    expect(decisions).toEqual([
      { allowed: true, remaining: 2, retryAfterMs: 0, resetAfterMs: 2_000, reason: 'allowed', expiresAtMs: 7_000 },
      { allowed: true, remaining: 1, retryAfterMs: 0, resetAfterMs: 2_000, reason: 'allowed', expiresAtMs: 7_000 },
    ]);
    const mine = limiter.tryAcquire('k').lease;
    expect(limiter.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: 2_000 });
    await worker.terminate(); // dies holding two places
    expect(mine?.release()).toBe(true);
    expect(limiter.tryAcquire('k', 0).remaining).toBe(1);
    clock.set(6_999.999);
    expect(limiter.tryAcquire('k', 2)).toMatchObject({ allowed: false, retryAfterMs: 0.001 });
    clock.set(7_000);
    expect(limiter.tryAcquire('k', 3)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it.each([
    { maxInFlight: 2, costs: [1] },
    { maxInFlight: 3, costs: [1, 2] },
  ])('4 workers on a frozen clock never hold more than $maxInFlight places of one key ($costs)', async ({ maxInFlight, costs }) => {
    const limiter = new ConcurrencyLimiter({ maxInFlight, leaseMs: 1_000, maxKeys: 8, clock: new ManualClock() });
    const gate = new SharedArrayBuffer(8);
    const counters = new SharedArrayBuffer(12);
    const pool = Array.from({ length: 4 }, (_, id) =>
      spawn({ mode: 'lease-hammer', handle: limiter.handle, id, key: 'hot', attempts: 40_000, costs, gate, counters }));
    const results = pool.map((w) => result<{ admitted: number; refused: number }>(w));
    await openGate(gate, 4);
    const all = await Promise.all(results);
    await Promise.all(pool.map((w) => w.terminate()));
    const [inFlight, most, failedReleases] = new Int32Array(counters);
    expect(most).toBeLessThanOrEqual(maxInFlight);
    expect(most).toBeGreaterThan(0);
    expect(inFlight).toBe(0);
    expect(failedReleases).toBe(0);
    expect(all.every((r) => r.admitted > 0)).toBe(true);
    expect(all.reduce((s, r) => s + r.refused, 0)).toBeGreaterThan(0); // the workers really contended
    expect(limiter.tryAcquire('hot', 0).remaining).toBe(maxInFlight); // every lease was released
    expect(limiter.stats().placesHeld).toBe(0);
  });

  it('workers terminated mid-acquire and mid-release leave no lasting harm: all places return after leaseMs', async () => {
    const clock = new ManualClock();
    const limiter = new ConcurrencyLimiter({ maxInFlight: 4, leaseMs: 5_000, maxKeys: 8, clock, claimTimeoutMs: 30 });
    for (let round = 0; round < 3; round++) {
      const gate = new SharedArrayBuffer(8);
      const counters = new SharedArrayBuffer(16);
      const pool = Array.from({ length: 4 }, (_, id) =>
        spawn({ mode: 'lease-churn-forever', handle: limiter.handle, id, key: 'hot', gate, counters }));
      const errors: unknown[] = [];
      for (const w of pool) w.on('error', (e) => errors.push(e));
      await openGate(gate, 4);
      const c = new Int32Array(counters);
      while ([0, 1, 2, 3].some((id) => Atomics.load(c, id) < 2_000)) {
        clock.advance(1_000); // leaked leases expire while they run
        await new Promise((r) => setTimeout(r, 1));
      }
      await Promise.all(pool.map((w) => w.terminate()));
      expect(errors).toEqual([]);
      // A killed worker may have held the key lock: this waits for the 30 ms takeover at most.
      expect(limiter.tryAcquire('hot', 0).remaining).toBeLessThanOrEqual(4);
      clock.advance(5_000);
      expect(limiter.tryAcquire('hot', 0).remaining).toBe(4);
      const leases = [1, 2, 3, 4].map(() => limiter.tryAcquire('hot').lease);
      expect(leases.every((l) => l !== null)).toBe(true);
      expect(limiter.tryAcquire('hot').allowed).toBe(false);
      for (const l of leases) expect(l?.release()).toBe(true);
    }
  });
});
