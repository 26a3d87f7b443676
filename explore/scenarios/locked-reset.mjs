// reset on a sliding log (rate/key-controls.ts, LockedControls over rate/fresh-state.ts): the
// key's limits written fresh under its lock, as the Prepare step of the locked protocol, which
// PolicyLimiter's reset and its change of rules share. The key holds one admission from the
// set-up (2 per second); thread 0 decides twice, thread 1 resets the key, then decides. With a
// claim timeout of 100 ms, a clock move past the steal age lets a thread take over a lock another
// still holds: a reset taken over mid-write must fail its compareExchanges, not clear a newer
// holder's entries. Checked: every admission and refusal, and each reset's answer (whether the
// key owed anything), against the exact sliding log with the reset emptying the log where it took
// effect; one live copy of the key; no lock taken over before its token was older than the steal
// age. Refusals are judged only in runs without a takeover, as in locked-log.
import { lockedLogVerdict, resetOrAllow, tableNames, twoPerSecondLog } from './_locks.mjs';

export default {
  name: 'locked-reset',
  what: 'reset under the key lock (the fresh write of the Prepare step) racing sliding-log decisions, with lock takeovers',
  ...twoPerSecondLog(),
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
      ctx.call('reset', () => rl.reset('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    return lockedLogVerdict(exec, lib, resetOrAllow);
  },
};
