// A reset of a sliding log that decisions try to take over mid-write (rate/fresh-state.ts,
// SlidingLog.writeFresh, table/slot-lock.ts): the key holds one admission from the set-up (2 per
// second); thread 0 resets it, then decides twice; thread 1 decides twice. Thread 0 goes first, so
// a single preemption inside the reset's writes and one clock move past the steal age put thread
// 1's decision at the reset's lock (locked-reset, whose deciding thread goes first, needs a
// preemption more). Found by a kill storm: a decision that took the lock over mid-reset admitted
// over the half-cleared log, and the reset, tried again, cleared those admissions (reset twice);
// then by an attack: a penalty in between wrote the stamp the reset had read, and the reset's
// clearing landed on it. A log's reset holds a guarded token, which a decision takes over only
// past the table's reuse age (3 s here): in the runs judged, never. Checked as locked-reset is,
// the takeover check (lockTakeovers) with the guarded token's age.
import { lockedLogVerdict, resetOrAllow, tableNames, twoPerSecondLog } from './_locks.mjs';

const base = twoPerSecondLog();

export default {
  name: 'locked-reset-takeover',
  what: 'a reset under the key lock taken over between its writes by decisions, which must never count the log emptier than a single reset leaves it',
  ...base,
  // 8 s of DFS in CI: the guard reverted (re-planted) is found in 7 s on 2 quiet cores.
  bounds: { ...base.bounds, ci: { dfsBudgetMs: 8_000, pctBudgetMs: 1_000 } },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('reset', () => rl.reset('k'));
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.call('allow', () => rl.allow('k')); // set-up: the key exists and holds one admission
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    return lockedLogVerdict(exec, lib, resetOrAllow);
  },
};
