// Regression (failed before #prepare read everything, then checked its lock, then wrote): a
// PolicyLimiter decision parked under its pair's lock, after underKeyLock's ctrl check
// (at the first clock reading of LockedEngine.#run, the one handed to #prepare), while sweep()
// takes the lock over (past 30x claimTimeoutMs, a reclaim's wait), reclaims the idle pair, and another pair with a rule
// of another shape takes the slot. The parked decision resumes in #prepare. Before the fix it
// read the new pair's shape, judged the state to be of another rule, and wrote a fresh state of
// its own rule over it (every compareExchange from values it had just read succeeded): the
// victim's spends were gone, and it was admitted 4 times for a fixed window of 2 per hour.
import { describe, expect, it } from 'vitest';
import { perHour, PolicyLimiter, type PolicyRule } from '../../src/index.js';
import { FROZEN_MS, park, pastReclaimGuard, stagedReuse } from '../helpers/park.js';
import { slotNumberOf, userSharingSlot } from '../helpers/slots.js';

const clock = { now: () => FROZEN_MS };

describe('a policy decision parked under its pair lock while sweep() reclaims the pair and another pair takes the slot', () => {
  it('must not overwrite the new pair\'s state (no over-admission of the new pair)', async () => {
    const base: PolicyRule[] = [{ limit: perHour(1) }]; // default: GCRA
    const options = { maxKeys: 8, ...stagedReuse(20), clock, hashSeed: 12345 };
    // A victim user whose pair has the same home slot as ('k', 'a'): it takes the reclaimed slot.
    const victim = userSharingSlot(() => new PolicyLimiter({ rules: base, ...options }), { user: 'k', api: 'a' }, '1:ka');
    const vKey = `${victim.length}:${victim}a`;
    const rules: PolicyRule[] = [...base, { user: victim, algorithm: 'fixed-window', limit: { permits: 2, periodMs: 3_600_000 } }];
    const policy = new PolicyLimiter({ rules, ...options });
    expect(policy.tryAcquire({ user: 'k', api: 'a' }, 0).allowed).toBe(true); // shaped, idle
    const home = slotNumberOf(policy.handle.table, '1:ka');

    // Parked at the first clock reading under the pair's lock: the one #prepare is given.
    const w = await park('policy', policy.handle, { user: 'k', api: 'a' }, 1, 1);
    expect(w.parked).toBe(true);

    pastReclaimGuard(20);
    expect(policy.sweep()).toBe(1); // took the parked worker's lock over: 'k' reclaimed
    let admitted = 0;
    for (let i = 0; i < 3; i++) if (policy.tryAcquire({ user: victim, api: 'a' }).allowed) admitted++;
    expect(admitted).toBe(2);
    expect(slotNumberOf(policy.handle.table, vKey)).toBe(home); // the victim lives in the reclaimed slot

    w.resume();
    const late = await w.next<{ allowed: boolean; reason: string }>();
    await w.worker.terminate();
    expect(late.allowed).toBe(true); // decided again for 'k' in a new slot
    for (let i = 0; i < 3; i++) if (policy.tryAcquire({ user: victim, api: 'a' }).allowed) admitted++;
    // A fixed window of 2 per hour, the clock frozen: 2 admitted in all.
    expect(admitted).toBe(2);
  });
});
