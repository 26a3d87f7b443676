// The middleware's GCRA give-back (skipFailedRequests: RateLimiter's spendGiveBack) racing
// decisions on its key while the clock moves, on the width-32 one-limit path (2 a second, a
// burst of 2: an interval of 500 ms). Thread 0 is admitted, takes the give-back of that
// admission at once (as the middleware does), then reads the key (a probe of cost 0) and gives
// back; thread 1 spends the key twice; thread 2 once. The schedule this is for (one time move):
// the spend, a jump of three intervals (the spend drained), thread 1's two admissions (the burst
// spent again, at one instant), then the give-back: it must give nothing, since nothing of the
// spend is still ahead; thread 2's admission would be a third at one instant. Checked: every
// admission against the exact model of the history without the spend given back (GCRA over the
// admissions, in order, with thread 0's spend removed once its give-back is placed): a give-back
// that leaves the key owing more than that is conservative, not judged (refusals are not
// judged); one live copy of the key.
import { giveBackCheck, giveBackThreads, giveBackTime, historyModel } from './_give-back.mjs';
import { tableNames } from './common.mjs';
import { gcra32Limit, gcra32Setup } from './_gcra32.mjs';

export default {
  name: 'gcra-give-back',
  what: "the middleware's GCRA give-back (spendGiveBack: no more than what of the spend is still ahead) racing decisions as the clock jumps",
  time: giveBackTime,
  // A third of the usual CI budget keeps npm run explore within its 3 minutes.
  bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  setup: gcra32Setup,
  threads: giveBackThreads,
  names: tableNames,
  check: (exec, lib) => giveBackCheck(exec, lib, historyModel(gcra32Limit)),
};
