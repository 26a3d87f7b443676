// PolicyLimiter: a rule change plus a reclaim, with the decision parked right after
// #prepare's holds() (test-only Atomics.load hook, park-after-check-worker.mjs): after #prepare
// read the pair's words for a reshape, before its first compareExchange. Interleaving:
//   'k' shaped under the default GCRA rule; setRules gives user 'k' a fixed window (new shape).
//   W: lock ('k','a'), reads shape (GCRA) + words, holds() -> PARKED
//   main: spin past 30x claimTimeoutMs; sweep() takes over and reclaims idle 'k'; the victim pair
//      (same home slot) takes the slot: NO_SHAPE, words = 'k''s old GCRA words; it reshapes and
//      spends its 2 per hour (fixed window, another shape)
//   W resumes: writeFresh compareExchanges from the words it read; the victim's reshape changed
//      them, so they fail, or (the unused words) land harmlessly; the shape swap fails.
// The victim admits exactly 2, 'k' at most 2 (its new rule).
import { describe, expect, it } from 'vitest';
import { perHour, PolicyLimiter, type PolicyRule } from '../../src/index.js';
import { FROZEN_MS, pastReclaimGuard, stagedReuse } from '../helpers/park.js';
import { parkAfterCheck } from '../helpers/park-after-check.js';
import { lockIndexOf, slotNumberOf, userSharingSlot } from '../helpers/slots.js';

const clock = { now: () => FROZEN_MS };

describe('a policy reshape stalled between holds() and its writes, rules changed, pair reclaimed', () => {
  it('the victim pair in the reused slot keeps its count', async () => {
    const base: PolicyRule[] = [{ limit: perHour(1) }];
    const options = { maxKeys: 8, ...stagedReuse(20), clock, hashSeed: 12345 };
    const victim = userSharingSlot(() => new PolicyLimiter({ rules: base, ...options }), { user: 'k', api: 'a' }, '1:ka');
    const fw: PolicyRule['limit'] = { permits: 2, periodMs: 3_600_000 };
    const policy = new PolicyLimiter({ rules: [...base, { user: victim, algorithm: 'fixed-window', limit: fw }], ...options });
    expect(policy.tryAcquire({ user: 'k', api: 'a' }, 0).allowed).toBe(true); // shaped GCRA, idle
    const kSlot = slotNumberOf(policy.handle.table, '1:ka');
    policy.setRules([...base, { user: victim, algorithm: 'fixed-window', limit: fw }, { user: 'k', algorithm: 'sliding-window', limit: fw }]);
    const w = await parkAfterCheck('policy', policy.handle, { user: 'k', api: 'a' }, 1, lockIndexOf(policy.handle.table, '1:ka'));
    expect(w.parked).toBe(true);
    pastReclaimGuard(20);
    expect(policy.sweep()).toBe(1);
    let admitted = 0;
    for (let i = 0; i < 3; i++) if (policy.tryAcquire({ user: victim, api: 'a' }).allowed) admitted++;
    expect(slotNumberOf(policy.handle.table, `${victim.length}:${victim}a`)).toBe(kSlot);
    w.resume();
    const late = await w.next<{ allowed: boolean }>();
    await w.worker.terminate();
    let k = late.allowed ? 1 : 0;
    for (let i = 0; i < 3; i++) if (policy.tryAcquire({ user: victim, api: 'a' }).allowed) admitted++;
    for (let i = 0; i < 3; i++) if (policy.tryAcquire({ user: 'k', api: 'a' }).allowed) k++;
    expect({ admitted, k }).toEqual({ admitted: 2, k: 2 });
  });
});
