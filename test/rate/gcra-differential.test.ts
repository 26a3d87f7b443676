// The hot paths (the lastSec bound in Gcra32.#spend and LockFreeEngine#allowGcra,
// the allow()-only path, the split of LimitSet.commit, the key cache) by differential replay:
// several instances on one thread (each its own key cache, engine and lastSec bounds, standing for
// threads), a ManualClock, and an exact GCRA reference in whole milliseconds. Timelines start at
// 0 and just before 2^31 s, 2^32 s and 2^33 s (the lastSec word wraps; seconds above 2^31 are
// negative int32), with idle gaps around 2^31 and 2^32 ticks, sweeps, a cache-less instance and
// costs of 0 and above the burst. Every answer must equal the reference's.
import { describe, expect, it } from 'vitest';
import { ManualClock, perMinute, perSecond, RateLimiter, type Limit } from '../../src/index.js';
import { mulberry32 } from '../helpers/random.js';

interface Spec { intervalMs: number; burst: number }

/** Exact GCRA over integer ms readings: per key, per limit, the TAT. */
class Reference {
  readonly #tat = new Map<string, number[]>();
  constructor(readonly specs: Spec[]) {}
  decide(key: string, now: number, cost: number): boolean {
    const tats = this.#tat.get(key) ?? this.specs.map(() => -Infinity);
    const next: number[] = [];
    for (let i = 0; i < this.specs.length; i++) {
      const { intervalMs, burst } = this.specs[i] as Spec;
      if (cost > burst) return false;
      const base = Math.max(tats[i] as number, now);
      const n = base + cost * intervalMs;
      if (n - now > burst * intervalMs) return false;
      next.push(n);
    }
    if (cost > 0) this.#tat.set(key, next);
    return true;
  }
}

const GAPS = [21_474, 21_475, 42_949, 42_950, 42_951, 10_000, 50_000, 86_000, 3_600_000];

function replay(limits: Limit[], specs: Spec[], startMs: number, seed: number, steps: number): string[] {
  const clock = new ManualClock(startMs);
  const first = new RateLimiter({ limit: limits.length === 1 ? (limits[0] as Limit) : limits, maxKeys: 8, clock });
  const instances = [first, RateLimiter.attach(first.handle), RateLimiter.attach(first.handle, { cacheSize: 0 })];
  const ref = new Reference(specs);
  const random = mulberry32(seed);
  const keys = ['a', 'b', 'c'];
  const wrong: string[] = [];
  for (let step = 0; step < steps && wrong.length < 5; step++) {
    const r = random();
    const dt = r < 0.3 ? 0
      : r < 0.6 ? 1 + Math.floor(random() * 50)
      : r < 0.85 ? 50 + Math.floor(random() * 1150)
      : r < 0.96 ? 1000 + Math.floor(random() * 2000)
      : GAPS[Math.floor(random() * GAPS.length)] as number;
    clock.advance(dt);
    const inst = instances[Math.floor(random() * instances.length)] as RateLimiter;
    if (random() < 0.03) {
      inst.sweep();
      continue;
    }
    const key = keys[Math.floor(random() * keys.length)] as string;
    const c = random();
    const cost = c < 0.7 ? 1 : c < 0.8 ? 0 : c < 0.95 ? 2 : 5;
    const useAllow = random() < 0.6;
    const got = useAllow ? inst.allow(key, cost) : inst.tryAcquire(key, cost).allowed;
    const want = ref.decide(key, clock.now(), cost);
    if (got !== want) wrong.push(`step ${step} at ${clock.now() - startMs} ms after start: ${useAllow ? 'allow' : 'tryAcquire'}(${key}, ${cost}) on instance ${instances.indexOf(inst)} said ${got}, reference ${want}`);
  }
  return wrong;
}

const STARTS: [string, number][] = [
  ['0', 0],
  ['2^31 s - 5 s', 2 ** 31 * 1000 - 5_000],
  ['2^32 s - 5 s', 2 ** 32 * 1000 - 5_000],
  ['2^33 s - 3 s', 2 ** 33 * 1000 - 3_000],
];

describe('differential replay of the hot paths against exact GCRA', () => {
  for (const [name, start] of STARTS) {
    it(`one limit (Gcra32), timeline from ${name}`, () => {
      for (let seed = 1; seed <= 4; seed++) {
        expect(replay([perSecond(10, { burst: 3 })], [{ intervalMs: 100, burst: 3 }], start, seed, 3_000)).toEqual([]);
      }
    });
    it(`two 32-bit GCRA limits (allowGcra and the general path), timeline from ${name}`, () => {
      for (let seed = 1; seed <= 4; seed++) {
        const limits = [perSecond(10, { burst: 3 }), perMinute(120, { burst: 4 })];
        expect(replay(limits, [{ intervalMs: 100, burst: 3 }, { intervalMs: 500, burst: 4 }], start, seed, 3_000)).toEqual([]);
      }
    });
  }
});
