// penalty and block on a key of two 32-bit GCRA limits (LockFreeEngine.force: every limit forced
// and committed in turn, never taken back, a limit that lost its race forced again), racing
// decisions on the same key that commit both limits and take the first back when the second now
// refuses. The key holds one admission from the set-up; thread 0 penalizes it by 1, then blocks it
// for 1.7 s; thread 1 spends it twice. Checked: every admission and refusal, with each control's
// effect where it took effect, against both GCRA models together (a penalty spends on each even
// past its burst; a block raises each to what refuses until its end, never lowering it), each
// limit's readings floored to its tick; one live copy of the key.
import { allOf, gcraModel } from '../models.mjs';
import { gcraOutcome, liveCopies, tableNames, timeMoves } from './common.mjs';
import { tickEarly } from './_windows.mjs';

const perSecond = { permits: 2, periodMs: 1000, burst: 2 };
const perMinute = { permits: 3, periodMs: 60_000, burst: 3 };
/** Past the first limit's burst window (1 s): a request 1 s after the block is still refused. */
const BLOCK_MS = 1_700;
/** The usual moves and one of a whole second, so that one move can drain the first limit's burst. */
const time = timeMoves({ startMs: 4999.75, tickMs: 1e-5, intervalMs: 500 });
time.moves.splice(2, 0, { name: '+1 s', to: (now) => now + 1000 });

export default {
  name: 'limits-controls',
  what: 'penalty and block on two GCRA limits (LockFreeEngine.force) racing decisions and their undo',
  time,
  // A third of the usual CI budget keeps npm run explore within its 3 minutes.
  bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: [lib.perSecond(2), lib.perMinute(3)], maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.call('allow', () => rl.allow('k')); // set-up: the key exists and holds one admission
      ctx.ready();
      ctx.call('penalty', () => rl.penalty('k', 1).remaining);
      ctx.call('block', () => rl.block('k', BLOCK_MS).remaining);
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
    const outcome = (c) => {
      if (c.label === 'allow') return { key: 'k', cost: 1, admitted: c.result === true };
      if (c.label === 'penalty') return { key: 'k', cost: 1, admitted: true, op: 'penalty' };
      if (c.label === 'block') return { key: 'k', cost: 0, admitted: true, op: 'block', blockMs: BLOCK_MS };
      return null;
    };
    // Each limit floors readings to its own tick: 10 ns per second, 1 us per minute; a block ends
    // up to two ticks late.
    const model = allOf(tickEarly(gcraModel(perSecond, { refusalSlackMs: 2e-5 }), 1e-5), tickEarly(gcraModel(perMinute, { refusalSlackMs: 2e-3 }), 1e-3));
    return liveCopies(exec.buffers[0], lib, ['k']) ?? gcraOutcome(exec, model, outcome);
  },
};
