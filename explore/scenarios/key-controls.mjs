// penalty, reward, reset and block (rate/key-controls.ts: modes of Gcra32's one compare-and-swap
// loop) against decisions on the same key, on the width-32 one-limit path. The key holds one
// admission from the set-up; thread 0 penalizes it by 1 then rewards 1, thread 1 spends it twice,
// thread 2 resets it, then blocks it for 700 ms. Checked: every admission and refusal, with each
// control's effect placed where it took effect, against the exact model (a penalty spends even
// past the burst; a reward gives back, a reset gives back everything, never below now; a block
// refuses until its end, never shortening a longer one), and one live copy of the key.
import { gcraModel } from '../models.mjs';
import { gcraOutcome, liveCopies, tableNames } from './common.mjs';
import { gcra32Limit, gcra32Setup, gcra32Time } from './_gcra32.mjs';

const limit = gcra32Limit;
/** Past one interval (500 ms) and short of the burst's window: the block is what refuses. */
const BLOCK_MS = 700;

export default {
  name: 'key-controls',
  what: 'penalty, reward, reset and block racing decisions on one key (Gcra32 #spend modes)',
  time: gcra32Time,
  // A third of the usual CI budget keeps npm run explore within its 3 minutes.
  bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  setup: gcra32Setup,
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.call('allow', () => rl.allow('k')); // set-up: the key exists and holds one admission
      ctx.ready();
      ctx.call('penalty', () => rl.penalty('k', 1).remaining);
      ctx.call('reward', () => rl.reward('k', 1)?.remaining ?? null);
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('allow', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('reset', () => rl.reset('k'));
      ctx.call('block', () => rl.block('k', BLOCK_MS).remaining);
    },
  ],
  names: tableNames,
  check(exec, lib) {
    const outcome = (c) => {
      if (c.label === 'allow') return { key: 'k', cost: 1, admitted: c.result === true };
      if (c.label === 'penalty') return { key: 'k', cost: 1, admitted: true, op: 'penalty' };
      if (c.label === 'reward') return { key: 'k', cost: 1, admitted: true, op: 'reward' };
      if (c.label === 'reset') return { key: 'k', cost: 0, admitted: true, op: 'reset' };
      if (c.label === 'block') return { key: 'k', cost: 0, admitted: true, op: 'block', blockMs: BLOCK_MS };
      return null;
    };
    return liveCopies(exec.buffers[0], lib, ['k']) ?? gcraOutcome(exec, gcraModel(limit, { refusalSlackMs: 2e-5 }), outcome);
  },
};
