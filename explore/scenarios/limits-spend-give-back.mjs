// gcra-give-back's race (see there) on a key of two 32-bit GCRA limits, on the lock-free engine
// (LockFreeEngine.giveBack with the spend's mark): 2 a second with a burst of 2, and 4 a minute
// with a burst of 4 (an interval of 15 s, which the clock's jumps never drain). Each limit gives
// back no more than what of the spend is still ahead under its own interval: the per-minute limit
// most of it, the per-second one nothing once the spend drained there. Checked against both
// history models together (allOf), each removing the spend given back; one live copy of the key.
import { allOf } from '../models.mjs';
import { giveBackCheck, giveBackThreads, giveBackTime, historyModel } from './_give-back.mjs';
import { tableNames } from './common.mjs';

const perSecond = { permits: 2, periodMs: 1000, burst: 2 };
const perMinute = { permits: 4, periodMs: 60_000, burst: 4 };

export default {
  name: 'limits-spend-give-back',
  what: "the middleware's GCRA give-back on two limits (the engine's, with the spend's mark) racing decisions as the clock jumps",
  time: giveBackTime,
  // Two thirds of a third of the usual CI budget keeps npm run explore within its 3 minutes.
  bounds: { ci: { dfsBudgetMs: 2_000, pctBudgetMs: 300 } },
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: [lib.perSecond(2), lib.perMinute(4)], maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: giveBackThreads,
  names: tableNames,
  check: (exec, lib) => giveBackCheck(exec, lib, allOf(historyModel(perSecond), historyModel(perMinute))),
};
