// PolicyLimiter's penalty, reward and block (a decision of cost 0 whose prepare step, under the
// pair's lock, forces every limit of the pair's GCRA rule: forced-state.ts) racing the pair's decisions
// under the same lock, as limits-controls does for RateLimiter's lock-free limits. The rule has
// two GCRA limits (64-bit states, as every rule's); the pair holds one admission from the set-up;
// thread 0 penalizes it by 1, rewards it 1, blocks it for 1.7 s, then unblocks it (PolicyLimiter.reset: the
// pair written fresh under its lock); thread 1 spends it twice.
// Checked: every admission and refusal, with each control's effect where it took effect, against
// both GCRA models together (readings floored to a tick; a block ends up to two ticks late).
import { allOf, gcraModel } from '../models.mjs';
import { gcraOutcome, tableNames, timeMoves } from './common.mjs';
import { tickEarly } from './_windows.mjs';

const perSecond = { permits: 2, periodMs: 1000, burst: 2 };
const perMinute = { permits: 3, periodMs: 60_000, burst: 3 };
const PAIR = { user: 'u', api: 'x' };
const BLOCK_MS = 1_700;
const time = timeMoves({ startMs: 4999.75, tickMs: 1e-5, intervalMs: 500 });
time.moves.splice(2, 0, { name: '+1 s', to: (now) => now + 1000 });

export default {
  name: 'policy-controls',
  what: 'PolicyLimiter penalty, reward, block and unblock (reset) under the pair lock racing decisions',
  time,
  // Runs are long (each call locks the pair, reads the rules' version, shapes): the usual CI
  // budget, fewer PCT runs.
  bounds: { ci: { pctRuns: 40 } },
  setup(lib) {
    const pl = new lib.PolicyLimiter({ rules: [{ limit: [lib.perSecond(2), lib.perMinute(3)] }], maxKeys: 4, hashSeed: 7 });
    return { buffers: [pl.handle.table, pl.handle.rules], data: { handle: pl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const pl = lib.PolicyLimiter.attach(handle);
      ctx.call('allow', () => pl.allow(PAIR)); // set-up: the pair exists and holds one admission
      ctx.ready();
      ctx.call('penalty', () => pl.penalty(PAIR, 1).remaining);
      ctx.call('reward', () => pl.reward(PAIR, 1)?.remaining ?? null);
      ctx.call('block', () => pl.block(PAIR, BLOCK_MS).remaining);
      ctx.call('unblock', () => pl.unblock(PAIR));
    },
    (ctx, { handle }, lib) => {
      const pl = lib.PolicyLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => pl.allow(PAIR));
      ctx.call('allow', () => pl.allow(PAIR));
    },
  ],
  names: tableNames,
  check(exec) {
    const outcome = (c) => {
      if (c.label === 'allow') return { key: 'k', cost: 1, admitted: c.result === true };
      if (c.label === 'penalty') return { key: 'k', cost: 1, admitted: true, op: 'penalty' };
      if (c.label === 'reward') return { key: 'k', cost: 1, admitted: true, op: 'reward' };
      if (c.label === 'block') return { key: 'k', cost: 0, admitted: true, op: 'block', blockMs: BLOCK_MS };
      if (c.label === 'unblock') return { key: 'k', cost: 0, admitted: true, op: 'reset' };
      return null;
    };
    const model = allOf(tickEarly(gcraModel(perSecond, { refusalSlackMs: 1e-3 }), 1e-3), tickEarly(gcraModel(perMinute, { refusalSlackMs: 1e-3 }), 1e-3));
    return gcraOutcome(exec, model, outcome);
  },
};
