// An admission on a key this thread charged in the second of its latest reading starts from what it
// wrote (SlotRef.tat) instead of an Atomics.load of tat (docs/design.md, "A thread's own write").
// Several instances on one handle stand for threads (each keeps its own SlotRefs). What must hold:
// - the load is skipped only then: a new second, a probe, a reservation and a fresh reference load;
// - another thread's write since makes the compareExchange fail, and the decision is made again on
//   what it read (not counted as a lost race);
// - an outcome that writes nothing (a refusal, over the burst) is taken only if a load finds our
//   write still in the word: a refund by another thread since must be seen;
// - every decision, allowed or not, equals a single limiter's given the same calls (seeded).
import { describe, expect, it } from 'vitest';
import { ManualClock, perSecond, RateLimiter, type Decision } from '../../src/index.js';
import { S_TAT } from '../../src/table/layout.js';
import { OWN_BACKOFF } from '../../src/rate/gcra-32.js';
import { slotBaseOf } from '../helpers/slots.js';
import { mulberry32 } from '../helpers/random.js';
import { loadsDuring } from '../helpers/atomics-spy.js';

/** Atomics.load calls on `key`'s tat word made by `f`. */
function tatLoads(limiter: RateLimiter, key: string, f: () => void): number {
  const at = slotBaseOf(limiter.handle.table, key) + S_TAT;
  return loadsDuring(f, (array, index) => array.buffer === limiter.handle.table && index === at);
}

function pair(ms: number, burst: number) {
  const clock = new ManualClock(ms);
  const a = new RateLimiter({ limit: perSecond(10, { burst }), maxKeys: 16, clock });
  return { clock, a, b: RateLimiter.attach(a.handle) };
}

describe('an admission from this thread\'s own write', () => {
  // Found by an attack on the per-thread records (slot-ref.ts): a reservation keeps a copy of the
  // key's reference, and its refund's write went to the copy only; the cached record still held
  // the reservation's word, the next admission took the refund for another thread's write, and
  // the key's next OWN_BACKOFF admissions each loaded tat.
  it("starts from a cancelled reservation's refund, this thread's own write", () => {
    const clock = new ManualClock(5_000.5);
    const a = new RateLimiter({ limit: perSecond(10, { burst: 2 }), maxKeys: 16, clock });
    expect([a.allow('k'), a.allow('k')]).toEqual([true, true]);
    const r = a.reserve('k', { maxWaitMs: 1_000 });
    expect(r.delayMs).toBeGreaterThan(0);
    expect(r.cancel()).toBe(true);
    let loads = 0;
    for (let i = 0; i < 8; i++) {
      clock.advance(100);
      loads += tatLoads(a, 'k', () => expect(a.allow('k')).toBe(true));
    }
    expect(loads).toBe(0);
  });

  it('skips the load of tat in the second of its last admission, and only then', () => {
    const { clock, a, b } = pair(5_000.5, 100);
    expect(b.allow('k')).toBe(true);
    expect(tatLoads(a, 'k', () => a.allow('k'))).toBeGreaterThan(0); // a's first: it finds the key and loads
    clock.advance(10);
    expect(tatLoads(a, 'k', () => expect(a.allow('k')).toBe(true))).toBe(0);
    expect(tatLoads(a, 'k', () => expect(a.tryAcquire('k').allowed).toBe(true))).toBe(0);
    // A probe writes nothing, and a reservation may wait: both load.
    expect(tatLoads(a, 'k', () => a.tryAcquire('k', 0))).toBe(1);
    expect(tatLoads(a, 'k', () => a.reserve('k'))).toBe(1);
    // The next second: the write is from another second, so the admission loads.
    clock.set(6_000.1);
    expect(tatLoads(a, 'k', () => expect(a.allow('k')).toBe(true))).toBe(1);
    expect(tatLoads(a, 'k', () => expect(a.allow('k')).toBe(true))).toBe(0);
  });

  it('decides again on what the compareExchange read when another thread wrote since, without counting a lost race', () => {
    const { clock, a, b } = pair(5_000.25, 4);
    expect(a.allow('k')).toBe(true); // a's own write: 1 of 4
    expect(b.allow('k')).toBe(true);
    expect(b.allow('k')).toBe(true); // 3 of 4
    clock.advance(1);
    // a starts from its write (1 of 4), which says 2 more fit; the word says 1 (0.01 refilled).
    expect(a.tryAcquire('k')).toMatchObject({ allowed: true, remaining: 0 });
    expect(a.allow('k')).toBe(false);
    expect(b.allow('k')).toBe(false);
    expect(a.stats().casRetries).toBe(0);
  });

  it('after a miss of its own write, loads for the next OWN_BACKOFF admissions of that key, then starts from its write again', () => {
    const { a, b } = pair(5_000.5, 1_000);
    expect(a.allow('k')).toBe(true);
    expect(tatLoads(a, 'k', () => a.allow('k'))).toBe(0);
    expect(b.allow('k')).toBe(true); // a's write is no longer in the word
    expect(tatLoads(a, 'k', () => expect(a.allow('k')).toBe(true))).toBe(1); // the miss: a failed exchange, then a load
    let loads = 0;
    for (let i = 0; i < OWN_BACKOFF; i++) loads += tatLoads(a, 'k', () => expect(a.allow('k')).toBe(true));
    expect(loads).toBe(OWN_BACKOFF);
    expect(tatLoads(a, 'k', () => expect(a.allow('k')).toBe(true))).toBe(0);
    expect(b.allow('other')).toBe(true);
    expect(tatLoads(a, 'other', () => a.allow('other'))).toBeGreaterThan(0); // a's first: found and loaded
    expect(tatLoads(a, 'other', () => a.allow('other'))).toBe(0); // another key's backoff is its own
  });

  it('takes an outcome that writes nothing only from the word: a refusal and over-the-burst see another thread\'s reservation', () => {
    const { clock, a, b } = pair(5_000.5, 3);
    expect([a.allow('k'), a.allow('k'), a.allow('k')]).toEqual([true, true, true]); // a's write: 3 of 3
    clock.advance(1);
    const r = b.reserve('k', { maxWaitMs: 1_000 }); // one more, beyond the burst: waits
    expect(r.delayMs).toBeCloseTo(99, 6);
    // a's write says "refused, 99 ms"; the word says 199 ms: the decision is the word's.
    expect(a.tryAcquire('k')).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: expect.closeTo(199, 6) as number });
    expect(a.tryAcquire('k', 4)).toMatchObject({ allowed: false, reason: 'exceeds-burst', resetAfterMs: expect.closeTo(399, 6) as number });
    expect(r.cancel()).toBe(true);
    // The word is a's write again: the same outcomes from it.
    expect(a.tryAcquire('k')).toMatchObject({ allowed: false, retryAfterMs: expect.closeTo(99, 6) as number });
    expect(a.tryAcquire('k', 4)).toMatchObject({ allowed: false, reason: 'exceeds-burst', resetAfterMs: expect.closeTo(299, 6) as number });
    expect(a.stats().casRetries).toBe(0);
  });

  it('matches a single limiter decision by decision over random calls by three threads (seeded)', () => {
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const rand = mulberry32(seed);
      const clock = new ManualClock(10_000.125);
      const limit = perSecond(50, { burst: 5 });
      const a = new RateLimiter({ limit, maxKeys: 16, clock });
      const threads = [a, RateLimiter.attach(a.handle), RateLimiter.attach(a.handle)];
      const model = new RateLimiter({ limit, maxKeys: 16, clock });
      const held: [ReturnType<RateLimiter['reserve']>, ReturnType<RateLimiter['reserve']>][] = [];
      const seen = { allowed: 0, refused: 0, cancelled: 0, seconds: 0 };
      for (let step = 0; step < 3_000; step++) {
        const t = threads[Math.floor(rand() * 3)] as RateLimiter;
        const key = rand() < 0.8 ? 'hot' : 'cold';
        const op = rand();
        if (op < 0.7) {
          const cost = rand() < 0.9 ? 1 : Math.floor(rand() * 7);
          const got: Decision = t.tryAcquire(key, cost);
          const want: Decision = model.tryAcquire(key, cost);
          expect(got, `seed ${seed} step ${step}`).toEqual(want);
          if (got.allowed) seen.allowed++;
          else seen.refused++;
        } else if (op < 0.8) {
          const maxWaitMs = 200;
          const attempt = (l: RateLimiter): ReturnType<RateLimiter['reserve']> | null => {
            try {
              return l.reserve(key, { maxWaitMs });
            } catch {
              return null; // the wait would exceed maxWaitMs: nothing counted
            }
          };
          const got = attempt(t);
          const want = attempt(model);
          expect(got === null, `seed ${seed} step ${step}: reserve`).toBe(want === null);
          if (got !== null && want !== null) {
            expect(got.delayMs).toBe(want.delayMs);
            held.push([got, want]);
          }
        } else if (op < 0.87 && held.length > 0) {
          const [got, want] = held.splice(Math.floor(rand() * held.length), 1)[0] as [ReturnType<RateLimiter['reserve']>, ReturnType<RateLimiter['reserve']>];
          const c = got.cancel();
          expect(c, `seed ${seed} step ${step}: cancel`).toBe(want.cancel());
          if (c) seen.cancelled++;
        } else {
          const before = Math.floor(clock.now() / 1000);
          clock.advance(rand() < 0.1 ? 700 : rand() * 30);
          if (Math.floor(clock.now() / 1000) !== before) seen.seconds++;
        }
      }
      // A cancel gives back only while no later spend stacked on its slot may still wait to act
      // (math/gcra.ts laterMayAct), so on this busy key few of them land: 2 to 6 per seed.
      for (const [name, n] of Object.entries(seen)) {
        expect(n, `seed ${seed}: ${name}`).toBeGreaterThan(name === 'cancelled' ? 1 : 3);
      }
    }
  });
});
