// coarseClock's travel with handles: ConcurrencyLimiter, PolicyLimiter and LocalTier
// (RateLimiter: test/coarse-clock.test.ts). A clock with no updater thread, far ahead of
// performance.now() (so its readers never move it): an attached instance must read the same
// word, so it sees the same frozen time and then the same step forward.
import { describe, expect, it } from 'vitest';
import { ConcurrencyLimiter, perSecond, PolicyLimiter } from '../../src/index.js';
import { BYTES, CoarseClock, publish, RESOLUTION_BYTE } from '../../src/time/coarse-clock.js';
import { LocalTier } from '../../src/redis/local-tier.js';

function frozen(ms: number): { clock: CoarseClock; w: Int32Array } {
  const buffer = new SharedArrayBuffer(BYTES);
  new Float64Array(buffer, RESOLUTION_BYTE, 1)[0] = 1;
  const w = new Int32Array(buffer);
  publish(w, ms, 1);
  return { clock: new CoarseClock(buffer), w };
}

describe('an attached instance reads its creator\'s coarse clock', () => {
  it('ConcurrencyLimiter: leases expire on the shared word', () => {
    const { clock, w } = frozen(1e9);
    const a = new ConcurrencyLimiter({ maxInFlight: 1, leaseMs: 1_000, maxKeys: 8, clock });
    expect(a.handle.clock).toBe(clock.buffer);
    const b = ConcurrencyLimiter.attach(a.handle);
    const lease = b.tryAcquire('k');
    expect(lease.lease?.expiresAtMs).toBe(1e9 + 1_000);
    expect(a.tryAcquire('k').allowed).toBe(false);
    publish(w, 1e9 + 1_000, 1);
    expect(a.tryAcquire('k').allowed).toBe(true);
  });

  it('PolicyLimiter: one rule, spent and refilled on the shared word', () => {
    const { clock, w } = frozen(1e9);
    const a = new PolicyLimiter({ rules: [{ limit: perSecond(1, { burst: 1 }) }], maxKeys: 8, clock });
    expect(a.handle.clock).toBe(clock.buffer);
    const b = PolicyLimiter.attach(a.handle);
    expect(b.allow({ user: 'u', api: 'a' })).toBe(true);
    expect(a.allow({ user: 'u', api: 'a' })).toBe(false);
    expect(b.tryAcquire({ user: 'u', api: 'a' }).retryAfterMs).toBe(1_000);
    publish(w, 1e9 + 1_000, 1);
    expect(a.allow({ user: 'u', api: 'a' })).toBe(true);
  });

  it('LocalTier: now() and refusals on the shared word', () => {
    const { clock, w } = frozen(1e9);
    const a = LocalTier.create({ clock, maxKeys: 8 });
    expect(a.handle.clock).toBe(clock.buffer);
    const b = LocalTier.attach(a.handle);
    expect(b.now()).toBe(1e9);
    expect(a.refuseUntil('k', 1e9 + 500)).toBe(true);
    expect(b.refusedFor('k')).toBe(500);
    publish(w, 1e9 + 200, 1);
    expect(b.now()).toBe(1e9 + 200);
    expect(b.refusedFor('k')).toBe(300);
  });
});
