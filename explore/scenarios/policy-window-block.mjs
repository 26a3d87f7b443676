// PolicyLimiter's block on a fixed-window rule of a limiter made with maxBlockMs: the pair's
// block word after the rule's limit (algorithms/block-until.ts), raised under the pair's lock by
// the forcing step (policy-limiter.ts #force, forced-state.ts), checked by decisions under the
// same lock. window-block's threads, on a pair: the set-up admits it once (2 a minute: one
// place left); thread 0 blocks it for 0.5 ms (to the next whole second), then checks it; thread
// 1 blocks it for 5 s; thread 2 checks it twice. Checked: every admission against a fixed window
// with a block that refuses every request until the first whole second at or after the longest
// block's end (refusals not judged, as in window-block); one live copy of the pair.
import { tableNames, timeMoves } from './common.mjs';
import { checkBlocks } from './_windows.mjs';

const limit = { permits: 2, periodMs: 60_000 };
const START_MS = 5999.25;
const SHORT_MS = 0.5;
const LONG_MS = 5_000;
const PAIR = { user: 'u', api: 'x' };

export default {
  name: 'policy-window-block',
  what: 'two blocks on a PolicyLimiter fixed-window rule (the pair\'s block word, under its lock) racing each other and decisions',
  time: timeMoves({ startMs: START_MS, tickMs: 1e-5, intervalMs: 1000 }),
  // Runs are long (each call locks the pair, reads the rules' version, shapes): fewer PCT runs.
  bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  setup(lib) {
    const pl = new lib.PolicyLimiter({ rules: [{ algorithm: 'fixed-window', limit: lib.perMinute(2) }], maxBlockMs: 60_000, maxKeys: 4, hashSeed: 7 });
    return { buffers: [pl.handle.table, pl.handle.rules], data: { handle: pl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const pl = lib.PolicyLimiter.attach(handle);
      pl.allow(PAIR); // set-up, at START_MS
      ctx.ready();
      ctx.call('block', () => pl.block(PAIR, SHORT_MS).remaining);
      ctx.call('allow', () => pl.allow(PAIR));
    },
    (ctx, { handle }, lib) => {
      const pl = lib.PolicyLimiter.attach(handle);
      ctx.ready();
      ctx.call('block-long', () => pl.block(PAIR, LONG_MS).remaining);
    },
    (ctx, { handle }, lib) => {
      const pl = lib.PolicyLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => pl.allow(PAIR));
      ctx.call('allow', () => pl.allow(PAIR));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    return checkBlocks(exec, lib, { limit, startMs: START_MS, shortMs: SHORT_MS, longMs: LONG_MS, liveKey: '1:ux' });
  },
};
