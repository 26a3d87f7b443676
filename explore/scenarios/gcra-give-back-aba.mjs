// The one-limit path's give-back against a reset whose admissions bring the key's word back to the
// very value the give-back read (1 a second, a burst of 1, width 32; the clock stays unless a move
// is chosen). Thread 0 spends the key (markedTryAcquire, in its set-up) and gives the spend back;
// thread 1 resets the key and checks it; thread 2 checks it. On a clock that stays, thread 1's
// check after the reset writes the TAT the spend wrote. A give-back that checked the mark before
// the reset and made its compareExchange after it would land on the fresh state, and thread 2's
// check would pass before the give-back's take-back: two admissions after the reset in a burst of
// 1, at one reading (found:
// docs/testing.md's entry of 2026-12-05, schedule 18:1 36:1 41:1 of gcra-give-back-reset's deep
// search before its clock lost 'stay'). Every give-back holds its slot's reset mark guard while it
// writes, and a reset takes it too (table/reset-marks.ts). Checked: every admission against the
// exact model of the history with the spend removed at its give-back and everything before a reset
// forgotten (refusals not judged); one live copy of the key.
import { giveBackCheck, giveBackTime, resetHistoryModel } from './_give-back.mjs';
import { tableNames } from './common.mjs';

/** 1 a second, a burst of 1, as the model sees it. */
const limit = { permits: 1, periodMs: 1000, burst: 1 };

export default {
  name: 'gcra-give-back-aba',
  what: "the one-limit GCRA give-back racing a reset and admissions that bring the key's word back to the give-back's snapshot",
  time: giveBackTime,
  // The clock stays unless moved: no move and no stale read is needed to rebuild the word, and
  // each costs a level of the search (gcra-give-back-reset races the give-back on moving clocks).
  bounds: { ci: { timeMoves: 0, staleReads: 0, dfsBudgetMs: 5_000, pctBudgetMs: 500 }, deep: { timeMoves: 1, staleReads: 1 } },
  setup: (lib) => {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(1), maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.penalty('k', 0); // set-up: the key is in the table, fresh
      let giveBack = null;
      ctx.call('spend', () => { // set-up too: a checked call before the threads start
        const admitted = lib.markedTryAcquire(rl, 'k', 1).allowed;
        if (admitted) giveBack = lib.spendGiveBack(rl, 'k', 1); // as the middleware: right after the admission
        return admitted;
      });
      ctx.ready();
      ctx.call('giveBack', () => {
        rl.tryAcquire('k', 0); // a step for the call (a refused spend gives nothing back, and reads nothing)
        giveBack?.();
        return true;
      });
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.penalty('k', 0);
      ctx.ready();
      ctx.call('reset', () => rl.reset('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.penalty('k', 0);
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check: (exec, lib) => giveBackCheck(exec, lib, resetHistoryModel(limit)),
};
