// A LockedEngine decision (sliding log; sliding log + global cap)
// parked under the key's lock at a clock reading (1: after the snapshot; 2: under the cap's lock),
// while sweep() takes the key's lock over, reclaims the idle key, and another key takes the slot
// and spends. The resumed decision has read the old key's snapshot and, lazily, the new key's
// entries; #holds must keep it from committing there, and the key is decided again in its new
// slot. Frozen clock: each key admits exactly its limit, the cap never more than its own.
import { describe, expect, it } from 'vitest';
import { perHour, RateLimiter, type RateLimiterOptions } from '../../src/index.js';
import { FROZEN_MS, park, pastReclaimGuard, stagedReuse } from '../helpers/park.js';

const configs: [string, Partial<RateLimiterOptions>, number][] = [
  ['a sliding log, parked after its snapshot', { limit: perHour(2), algorithm: 'sliding-log' }, 1],
  ['a sliding log + cap, parked after its snapshot', { limit: perHour(2), algorithm: 'sliding-log', globalLimit: perHour(3) }, 1],
  ['a sliding log + cap, parked under the cap lock', { limit: perHour(2), algorithm: 'sliding-log', globalLimit: perHour(3) }, 2],
  ['two fixed windows (locked set), parked after its snapshot', { limit: [perHour(2), perHour(5)], algorithm: 'fixed-window' }, 1],
];

describe('a locked decision parked while sweep() reclaims its key and another key takes the slot', () => {
  it.each(configs)('%s', async (_name, options, parkAt) => {
    const limiter = new RateLimiter({ maxKeys: 8, ...stagedReuse(20), clock: { now: () => FROZEN_MS }, forceHash: 11, ...options } as RateLimiterOptions);
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await park('rate', limiter.handle, 'k', 1, parkAt);
    expect(w.parked).toBe(true);
    pastReclaimGuard(20);
    const swept = limiter.sweep();
    let other = 0;
    for (let i = 0; i < 3; i++) if (limiter.tryAcquire('other').allowed) other++;
    let k = 0;
    if (limiter.tryAcquire('k').allowed) k++;
    w.resume();
    const late = await w.next<{ allowed: boolean }>();
    await w.worker.terminate();
    if (late.allowed) k++;
    for (let i = 0; i < 3; i++) if (limiter.tryAcquire('k').allowed) k++;
    for (let i = 0; i < 3; i++) if (limiter.tryAcquire('other').allowed) other++;
    const cap = options.globalLimit === undefined ? Infinity : 3;
    expect({ swept, other: other <= 2, k: k <= 2, total: k + other <= cap }).toEqual({ swept: 1, other: true, k: true, total: true });
    if (cap === Infinity) expect({ k, other }).toEqual({ k: 2, other: 2 });
  });
});
