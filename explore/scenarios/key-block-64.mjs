// block on the width-64 one-limit path (WideGcra #spend's BLOCK mode) against decisions on the
// same key: gcra-64's rate (250 million a second: a 64-bit TAT in ticks of 2 ns) with a burst of
// 10, so that a block's debt is mostly the tolerance (what a block must add to refuse at all).
// The key holds one admission from the set-up; thread 0 checks it twice, thread 1 blocks it for
// 5 ticks (10 ns). Checked on the tick grid, as gcra-64: every admission and refusal against the
// exact model, the block placed where it took effect (nothing passes until its end; a longer debt
// is never lowered), and one live copy of the key. The limiter's block may end up to two ticks
// late (the block rounded up, and a tick for the reading's rounding down): refusals that close to
// conforming are justified.
import { gcraModel, linearizable } from '../models.mjs';
import { callsOnTickGrid, liveCopies, tableNames, timeMoves } from './common.mjs';

const limit = { permits: 250_000_000, periodMs: 1000, burst: 10 };
const TICK_MS = 2e-6;
/** The same limit with time in ticks of TICK_MS: one permit per 2 ticks, burst 10. */
const TICK_LIMIT = { permits: 1, periodMs: 2, burst: 10 };
/** The block: 5 ticks. */
const BLOCK_TICKS = 5;

export default {
  name: 'key-block-64',
  what: 'WideGcra block (raised to the block, never lowered) racing decisions on one key',
  time: timeMoves({ startMs: 4_096_000, tickMs: TICK_MS, intervalMs: 4e-6 }),
  // Kept short: npm run explore stays within its 3 minutes.
  bounds: { ci: { dfsBudgetMs: 1_500, pctBudgetMs: 300 } },
  setup(lib) {
    const rl = new lib.RateLimiter({ limit, maxKeys: 4, hashSeed: 7 });
    if (rl.stats().width !== 64) throw new Error('key-block-64: the limit no longer takes the 64-bit path');
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
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
  check(exec, lib) {
    const copies = liveCopies(exec.buffers[0], lib, ['k']);
    if (copies !== null) return copies;
    const { calls } = callsOnTickGrid(exec, TICK_MS);
    const outcome = (c) => (c.label === 'block'
      ? { key: 'k', cost: 0, admitted: true, op: 'block', blockMs: BLOCK_TICKS }
      : { key: 'k', cost: 1, admitted: c.result === true });
    return linearizable(calls, gcraModel(TICK_LIMIT, { refusalSlackMs: 2 }), outcome);
  },
};
