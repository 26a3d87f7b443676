// A global cap fast enough to be served to allow() in per-thread batches (rate/global-batch.ts:
// take, use, giveBack, release; LockFreeEngine#decideBatched, and its fall back to the cap's word).
// The cap (10,000,000 a second, burst 400: batches of up to 12 permits held for 1.25 us) is
// spent down to 2 permits in the set-up; then one thread asks three times for its key and another
// twice for its own, with the clock staying, moving a tick, crossing an interval edge (0.1 us: one
// more permit), a second or a wrap, or stepping back. A batch may hold permits another thread is then refused (conservative:
// the cap refuses up to a batch early), so only admissions are judged: no order of the calls
// admits more than the exact GCRA of the key limits and the cap together. And one live copy per key.
import { tableNames, timeMoves } from './common.mjs';
import { batchCheck, batchSetup, cap, START_MS } from './_global-batch.mjs';

/** The cap's spend in the set-up: 2 permits left. */
const SPENT = 398;

export default {
  name: 'global-batch',
  what: 'per-thread batches of a fast global cap: take, use, give back, release by compareExchange, and the exact fallback',
  time: timeMoves({ startMs: START_MS, tickMs: 1e-5, intervalMs: 1000 / cap.permits, wrapMs: 2 ** 31 * 1e-5 }),
  setup: batchSetup,
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.call('spend x', () => rl.allow('x', SPENT)); // set-up: the cap down to 2 permits
      ctx.ready();
      ctx.call('allow a', () => rl.allow('a'));
      ctx.call('allow a', () => rl.allow('a'));
      ctx.call('allow a', () => rl.allow('a'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow b', () => rl.allow('b'));
      ctx.call('allow b', () => rl.allow('b'));
    },
  ],
  names: tableNames,
  check: (exec, lib) => batchCheck(exec, lib, (label) => [label.slice(-1), label === 'spend x' ? SPENT : 1]),
};
