// block on the width-64 one-limit path (WideGcra #spend's BLOCK mode) against decisions on the
// same key: gcra-64's rate (250 million a second: a 64-bit TAT in ticks of 2 ns) with a burst of
// 10, so that a block's debt is mostly the tolerance (what a block must add to refuse at all).
// The key holds one admission from the set-up; thread 0 checks it twice, thread 1 blocks it for
// 5 ticks (10 ns). Checked on the tick grid, as gcra-64: every admission and refusal against the
// exact model, the block placed where it took effect (nothing passes until its end; a longer debt
// is never lowered), and one live copy of the key. The limiter's block may end up to two ticks
// late (the block rounded up, and a tick for the reading's rounding down): refusals that close to
// conforming are justified.
import { tableNames } from './common.mjs';
import { gcra64Check, gcra64Limits, gcra64Setup, gcra64Time, TICK_MS } from './_gcra64.mjs';

/** Burst 10. */
const { limit, tickLimit } = gcra64Limits(10);
/** The block: 5 ticks. */
const BLOCK_TICKS = 5;

export default {
  name: 'key-block-64',
  what: 'WideGcra block (raised to the block, never lowered) racing decisions on one key',
  time: gcra64Time,
  // Kept short: npm run explore stays within its 3 minutes.
  bounds: { ci: { dfsBudgetMs: 1_500, pctBudgetMs: 300 } },
  setup: gcra64Setup(limit, 'key-block-64'),
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
      ctx.call('block', () => rl.block('k', BLOCK_TICKS * TICK_MS).remaining);
    },
  ],
  names: tableNames,
  check: gcra64Check(tickLimit, (c) => (c.label === 'block'
    ? { key: 'k', cost: 0, admitted: true, op: 'block', blockMs: BLOCK_TICKS }
    : { key: 'k', cost: 1, admitted: c.result === true }), 2),
};
