// Regression: a PolicyLimiter reshape stalled right after its holds() check must not write into
// the slot's next pair. Found by a PolicyLimiter kill storm (policy-kill-storm.test.ts), staged
// here with a worker parked after the load of its lock word that returned its token
// (park-after-check-worker.mjs):
//   'k' shaped under the default GCRA rule (no spend, frozen clock); setRules gives user 'k' a
//      sliding log (another shape);
//   W: locks ('k','a'), reads the GCRA shape and words, holds() -> PARKED
//   main: past claimTimeoutMs, either sweep() takes W's lock over, or a decision on 'k' does and
//      releases it and sweep() follows; 'k' is idle, so it is reclaimed; the victim pair (same
//      home slot, default GCRA rule) takes the slot and is shaped without a spend, at the same
//      frozen instant: its words equal those W read;
//   W resumes: every compareExchange of its fresh sliding log lands on the victim's words; only
//      its version swap fails. The victim then held a log's empty marks (NO_ENTRY) as its TAT
//      under its GCRA shape.
// Before the fix the victim refused its first request (admitted 0 of its 1 per hour); in the
// storm, a pair of another shape threw inside its key lock. Now a reclaim takes a
// lock over only once it is 30x claimTimeoutMs old, and a decision that took one over leaves a
// released mark that a reclaim waits out as long (table/slot-lock.ts).
import { describe, expect, it } from 'vitest';
import { perHour, PolicyLimiter, type PolicyRule } from '../../src/index.js';
import { FROZEN_MS, pastTimeout, stagedReuse } from '../helpers/park.js';
import { parkAfterCheck } from '../helpers/park-after-check.js';
import { lockIndexOf, slotNumberOf, userSharingSlot } from '../helpers/slots.js';

const clock = { now: () => FROZEN_MS };
const claimTimeoutMs = 20;

async function stage(takeOverFirst: boolean) {
  const base: PolicyRule[] = [{ limit: perHour(1) }];
  const options = { maxKeys: 8, ...stagedReuse(claimTimeoutMs), clock, hashSeed: 12345 };
  const victim = userSharingSlot(() => new PolicyLimiter({ rules: base, ...options }), { user: 'k', api: 'a' }, '1:ka');
  const vKey = `${victim.length}:${victim}a`;
  const policy = new PolicyLimiter({ rules: base, ...options });
  expect(policy.tryAcquire({ user: 'k', api: 'a' }, 0).allowed).toBe(true); // shaped GCRA, idle
  const kSlot = slotNumberOf(policy.handle.table, '1:ka');
  policy.setRules([...base, { user: 'k', algorithm: 'sliding-log', limit: { permits: 2, periodMs: 3_600_000 } }]);
  const w = await parkAfterCheck('policy', policy.handle, { user: 'k', api: 'a' }, 0, lockIndexOf(policy.handle.table, '1:ka'));
  expect(w.parked).toBe(true);
  pastTimeout(claimTimeoutMs + 10);
  // A probe (cost 0) takes the stalled lock over, reshapes 'k' and releases: 'k' stays idle.
  if (takeOverFirst) expect(policy.tryAcquire({ user: 'k', api: 'a' }, 0).allowed).toBe(true);
  const swept = policy.sweep();
  // The victim, shaped without a spend at the frozen instant: in k's old slot if 'k' was reclaimed.
  expect(policy.tryAcquire({ user: victim, api: 'a' }, 0).allowed).toBe(true);
  const reused = slotNumberOf(policy.handle.table, vKey) === kSlot;
  w.resume();
  const late = await w.next<{ allowed: boolean }>();
  await w.worker.terminate();
  expect(late.allowed).toBe(true); // a probe
  let admitted = 0;
  for (let i = 0; i < 3; i++) if (policy.tryAcquire({ user: victim, api: 'a' }).allowed) admitted++;
  let k = 0;
  for (let i = 0; i < 3; i++) if (policy.tryAcquire({ user: 'k', api: 'a' }).allowed) k++;
  return { swept, reused, admitted, k };
}

describe('a policy reshape stalled after holds() while its pair is reclaimed and the slot reused', () => {
  it('sweep() does not take the stalled lock over before 30x claimTimeoutMs; the victim keeps its GCRA limit', async () => {
    const r = await stage(false);
    expect(r).toEqual({ swept: 0, reused: false, admitted: 1, k: 2 });
  });

  it('a decision that took the lock over leaves a mark: sweep() waits, the victim keeps its GCRA limit', async () => {
    const r = await stage(true);
    expect(r).toEqual({ swept: 0, reused: false, admitted: 1, k: 2 });
  });

  it('a holder that died is reclaimed once its lock is 30x claimTimeoutMs old, not before', async () => {
    const policy = new PolicyLimiter({ rules: [{ limit: perHour(1) }], maxKeys: 8, ...stagedReuse(claimTimeoutMs), clock, hashSeed: 12345 });
    expect(policy.tryAcquire({ user: 'k', api: 'a' }, 0).allowed).toBe(true);
    policy.setRules([{ limit: perHour(1) }, { user: 'k', algorithm: 'sliding-log', limit: { permits: 2, periodMs: 3_600_000 } }]);
    const w = await parkAfterCheck('policy', policy.handle, { user: 'k', api: 'a' }, 0, lockIndexOf(policy.handle.table, '1:ka'));
    expect(w.parked).toBe(true);
    await w.worker.terminate(); // dies holding the pair's lock
    pastTimeout(claimTimeoutMs + 10);
    expect(policy.sweep()).toBe(0);
    pastTimeout(30 * claimTimeoutMs);
    expect(policy.sweep()).toBe(1);
    expect(slotNumberOf(policy.handle.table, '1:ka')).toBe(-1);
  });
});
