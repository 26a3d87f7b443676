// A locked RateLimiter decision (sliding log; with a global cap) stalled in the one window no
// clock reading reaches: after #holds(key) returned its token, before its commits. A test-only
// hook parks it there (fixtures/park-after-check-worker.mjs wraps Atomics.load in the worker).
//   W: lock 'k', snapshot (fresh log), clock, check, [cap lock, cap snapshot, cap check],
//      #holds(key) -> parked
//   main: past 30x claimTimeoutMs, sweep() takes the lock over and reclaims idle 'k'; 'other'
//      (forceHash: same home) takes the slot with a fresh log equal to the one W read
//   W resumes: [commits the cap], commits the log by compareExchange from its snapshot, which
//      lands on 'other' (equal words); settle sees ctrl changed -> lost() [gives the cap back],
//      and 'k' is decided again in its new slot.
// What such a stall costs (docs/design.md, the locked engine): 'other' may carry W's entry, one
// admission fewer for its period; never one more. Each key admits at most its limit.
import { describe, expect, it } from 'vitest';
import { perHour, RateLimiter, type RateLimiterOptions } from '../../src/index.js';
import { FROZEN_MS, pastReclaimGuard, stagedReuse } from '../helpers/park.js';
import { parkAfterCheck } from '../helpers/park-after-check.js';
import { lockIndexOf } from '../helpers/slots.js';

const configs: [string, Partial<RateLimiterOptions>][] = [
  ['a sliding log', { limit: perHour(2), algorithm: 'sliding-log' }],
  ['a sliding log + global cap', { limit: perHour(2), algorithm: 'sliding-log', globalLimit: perHour(10) }],
];

describe('a locked decision stalled between its lock check and its commits', () => {
  it.each(configs)('%s: the slot\'s next key is charged at most once more, never less', async (_name, options) => {
    const limiter = new RateLimiter({ maxKeys: 8, ...stagedReuse(20), clock: { now: () => FROZEN_MS }, forceHash: 11, ...options } as RateLimiterOptions);
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await parkAfterCheck('rate', limiter.handle, 'k', 1, lockIndexOf(limiter.handle.table, 'k'));
    expect(w.parked).toBe(true);
    pastReclaimGuard(20);
    expect(limiter.sweep()).toBe(1);
    expect(limiter.tryAcquire('other', 0).allowed).toBe(true); // takes the slot, nothing spent
    w.resume();
    const late = await w.next<{ allowed: boolean }>();
    await w.worker.terminate();
    let k = late.allowed ? 1 : 0;
    let other = 0;
    for (let i = 0; i < 3; i++) if (limiter.tryAcquire('k').allowed) k++;
    for (let i = 0; i < 3; i++) if (limiter.tryAcquire('other').allowed) other++;
    expect(k).toBe(2);
    expect(other).toBeGreaterThanOrEqual(1); // 2, or 1 when W's stale entry landed on it
    expect(other).toBeLessThanOrEqual(2);
  });

  it('a sliding log + global cap, slot left DEAD: lost() gives the cap back exactly once', async () => {
    // Nobody touches the cap's lock while W is parked, so W commits the cap,
    // then its log on the DEAD slot; settle -> lost() -> undo of the cap; 'k' decided again.
    const limiter = new RateLimiter({ maxKeys: 8, ...stagedReuse(20), clock: { now: () => FROZEN_MS }, forceHash: 11, limit: perHour(2), algorithm: 'sliding-log', globalLimit: perHour(3) });
    expect(limiter.tryAcquire('k', 0).allowed).toBe(true);
    const w = await parkAfterCheck('rate', limiter.handle, 'k', 1, lockIndexOf(limiter.handle.table, 'k'));
    expect(w.parked).toBe(true);
    pastReclaimGuard(20);
    expect(limiter.sweep()).toBe(1);
    w.resume();
    const late = await w.next<{ allowed: boolean }>();
    await w.worker.terminate();
    let k = late.allowed ? 1 : 0;
    let others = 0;
    for (let i = 0; i < 3; i++) if (limiter.tryAcquire('k').allowed) k++;
    for (const x of ['x', 'y', 'z']) if (limiter.tryAcquire(x).allowed) others++;
    expect({ late: late.allowed, k, others }).toEqual({ late: true, k: 2, others: 1 });
  });
});
