// Found by an attack on the first check's admission by its insert (first-check.test.ts): every
// insert took its fresh state at the limiter's latest reading, so after the clock stepped back an
// unspent key (a probe, a cost beyond the burst) got a stamp ahead of the clock: it did not go
// idle, and other threads decided on it at that later second. A fresh state that counts nothing
// is taken at the clock's own reading, as before; only a counted admission uses the latest.
import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/index.js';

const limit = { permits: 10, periodMs: 1000, burst: 1 };

describe('a new key inserted after the clock stepped back, spending nothing', () => {
  it('goes idle with the clock', () => {
    let t = 10_000;
    const rl = new RateLimiter({ limit, maxKeys: 64, clock: { now: () => t } });
    rl.allow('a');
    t = 9_000;
    rl.tryAcquire('p', 0);
    expect(rl.tryAcquire('q', 5)).toMatchObject({ allowed: false, reason: 'exceeds-burst' });
    t = 9_000.5;
    expect(rl.sweep()).toBe(2);
  });

  it('reads as fresh to another thread', () => {
    let t = 10_000;
    const clock = { now: () => t };
    const a = new RateLimiter({ limit, maxKeys: 64, clock });
    a.allow('a');
    t = 9_000;
    a.tryAcquire('p', 0);
    const b = RateLimiter.attach(a.handle, { clock });
    expect(b.tryAcquire('p')).toMatchObject({ allowed: true, resetAfterMs: 100 });
    t += 150;
    expect(b.tryAcquire('p').allowed).toBe(true);
  });

  it("leaves its slot reclaimable: a full table (onFull 'allow') still tracks a new key", () => {
    let t = 10_000;
    const rl = new RateLimiter({ limit, maxKeys: 2, onFull: 'allow', forceHash: 5, clock: { now: () => t } });
    rl.allow('a');
    t = 9_000;
    for (const k of ['p1', 'p2', 'p3', 'p4', 'p5']) rl.tryAcquire(k, 0);
    t = 9_000.5;
    const reasons = [1, 2, 3, 4, 5].map(() => rl.tryAcquire('z').reason);
    expect(reasons).toEqual(['allowed', 'limited', 'limited', 'limited', 'limited']);
  });

  it('a first check it admits is decided at the latest reading, as a decision after the insert would be', () => {
    let t = 10_000;
    const rl = new RateLimiter({ limit, maxKeys: 64, clock: { now: () => t } });
    rl.allow('a');
    t = 9_000;
    // Admitted at 10,000 (the latest reading): the next passes at 10,100, not 9,100.
    expect(rl.tryAcquire('n')).toMatchObject({ allowed: true, resetAfterMs: 1_100 });
    t = 9_200;
    expect(rl.tryAcquire('n')).toMatchObject({ allowed: false, retryAfterMs: 900 });
  });
});
