// penalty and reward on a sliding log (rate/key-controls.ts LockedControls over
// rate/forced-state.ts forceUnderLock and SlidingLog.force): every limit forced under the key's
// lock, as the Prepare step of the locked protocol. The key holds one admission from the set-up
// (2 per second); thread 0 decides twice, thread 1 penalizes the key by 1, rewards it by 1, then
// decides. A reward moves the log's head back over its newest entries first, then clears them,
// each only while the head is still its own. With a claim timeout of 100 ms, a clock move past
// the steal age lets a thread take over a lock another still holds: a control taken over
// mid-write must not clear a newer holder's entries. Checked: every admission and refusal
// against the exact sliding log with the penalty and reward where they took effect; one live copy
// of the key; no lock taken over before its token was older than the steal age. Refusals are
// judged only in runs without a takeover, as in locked-log.
import { lockedLogVerdict, tableNames, twoPerSecondLog } from './_locks.mjs';

export default {
  name: 'locked-controls',
  what: 'penalty and reward under the key lock (forceUnderLock on a sliding log) racing decisions, with lock takeovers',
  ...twoPerSecondLog(),
  // A third of the usual CI budget keeps npm run explore within its 3 minutes.
  bounds: { ...twoPerSecondLog().bounds, ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.call('allow', () => rl.allow('k')); // set-up: the key exists and holds one admission
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('penalty', () => rl.penalty('k', 1).remaining);
      ctx.call('reward', () => rl.reward('k', 1)?.remaining ?? null);
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    const outcome = (c) => {
      if (c.error !== null) return null;
      if (c.label === 'allow') return { key: 'k', cost: 1, admitted: c.result === true };
      if (c.label === 'penalty') return { key: 'k', cost: 1, admitted: true, op: 'penalty' };
      if (c.label === 'reward') return { key: 'k', cost: 1, admitted: true, op: 'reward' };
      return null;
    };
    return lockedLogVerdict(exec, lib, outcome);
  },
};
