// Blocks on a fixed window made with maxBlockMs (the key's block word after its limit, raised by
// LockFreeEngine.force to the block's end, never lowered: algorithms/block-until.ts) racing each
// other and decisions, which load the word with the window and write nothing to it. The set-up
// admits the key once (2 a minute: one place left). Thread 0 blocks the key for 0.5 ms (to the
// next whole second), then checks it; thread 1 blocks it for 5 s; thread 2 checks it twice. Of two blocks the longer
// stays: one whose compareExchange lost to the other decides again on what it finds. Checked:
// every admission against the exact model, a fixed window with a block that refuses every
// request until the first whole second at or after the longest block's end (refusals not judged:
// a decision that read the window before a block and committed after it keeps its spend, and
// one whose call overlaps a block may come before it); one live copy of the key.
import { tableNames, timeMoves } from './common.mjs';
import { checkBlocks } from './_windows.mjs';

const limit = { permits: 2, periodMs: 60_000 };
// The short block ends at the next whole second (6,000 ms), one second edge away; the long one at
// 11,000: a check one clock move after a short block that wrote over the long one passes.
const START_MS = 5999.25;
const SHORT_MS = 0.5;
const LONG_MS = 5_000;

export default {
  name: 'window-block',
  what: 'two blocks on a fixed window (its block word) racing each other and decisions',
  time: timeMoves({ startMs: START_MS, tickMs: 1e-5, intervalMs: 1000 }),
  bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: lib.perMinute(2), algorithm: 'fixed-window', maxBlockMs: 60_000, maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.allow('k'); // set-up, at START_MS
      ctx.ready();
      ctx.call('block', () => rl.block('k', SHORT_MS).remaining);
      ctx.call('allow', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('block-long', () => rl.block('k', LONG_MS).remaining);
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    return checkBlocks(exec, lib, { limit, startMs: START_MS, shortMs: SHORT_MS, longMs: LONG_MS, liveKey: 'k' });
  },
};
