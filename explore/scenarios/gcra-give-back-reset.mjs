// The middleware's GCRA give-back (markedTryAcquire, then spendGiveBack) racing a reset of its key
// on the width-32 one-limit path, whose word is the state alone (2 a second, a burst of 2; the
// clock moves forward only). Thread 0 spends the key and gives the spend back; thread 1 resets
// the key and checks it three times. A reset makes the key fresh: the spend is forgotten, and a
// give-back after it must give nothing, or thread 1's third check would pass on the spend's
// interval (three admissions after the reset in a burst of 2). The admission loads its slot's
// reset mark before its decision, and the give-back gives nothing once it moved
// (table/reset-marks.ts). Checked: every admission against the exact model of the history with
// the spend removed at its give-back and everything before a reset forgotten (refusals are not
// judged: a give-back that keeps the spend, when the reset's mark moved while the spend was being
// decided, is conservative); one live copy of the key.
import { giveBackCheck, giveBackTime, resetHistoryModel } from './_give-back.mjs';
import { tableNames } from './common.mjs';
import { gcra32Limit, gcra32Setup } from './_gcra32.mjs';

/**
 * giveBackTime's moves less 'stay': every reading is later than the one before. The one-limit
 * path's remaining gap (docs/testing.md, "Found, not yet fixed") is a reset and admissions that
 * bring the key's word back to the value a give-back read: the deep search finds it with 'stay'
 * (schedule 18:1 36:1 41:1). Without it, this scenario cannot build that word: thread 1 admits
 * nothing before its reset, and each of its admissions after it reads later than the spend, off
 * the spend's interval grid (an admission exactly whole intervals after the spend, after one
 * before the reset, rebuilds it too: staged in docs/testing.md's entry, not here).
 */
const time = { ...giveBackTime, moves: giveBackTime.moves.filter((m) => m.name !== 'stay') };

export default {
  name: 'gcra-give-back-reset',
  what: "the middleware's one-limit GCRA give-back racing a reset of its key (the reset mark read before the spend's decision)",
  time,
  bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  setup: gcra32Setup,
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.penalty('k', 0); // set-up: the key is in the table, fresh
      ctx.ready();
      let giveBack = null;
      ctx.call('spend', () => {
        const admitted = lib.markedTryAcquire(rl, 'k', 1).allowed;
        if (admitted) giveBack = lib.spendGiveBack(rl, 'k', 1); // as the middleware: right after the admission
        return admitted;
      });
      ctx.call('giveBack', () => {
        rl.tryAcquire('k', 0); // a reading for the call (the give-back itself may read none)
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
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check: (exec, lib) => giveBackCheck(exec, lib, resetHistoryModel(gcra32Limit)),
};
