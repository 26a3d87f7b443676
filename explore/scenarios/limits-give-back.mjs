// reward on a key of two 32-bit GCRA limits (LockFreeEngine.giveBack, under the key's give-back
// guard: rate/give-back-guard.ts) racing decisions that commit the first limit (one per minute)
// and take it back when the second (a burst of 1 at ten a second) now refuses. The key is in the
// table and fresh after the set-up. Thread 0 rewards it by 1; thread 1 spends it, then reads
// what the first limit has left (tryAcquire of cost 0); thread 2 spends it. The schedule this is
// for: thread 1 commits the first limit, the reward gives that spend back, thread 2 writes the
// same word and takes the second limit, thread 1's second limit refuses and it takes back its
// first; its read then finds the first limit spent by thread 2 only if that take-back did not
// land. Checked: every admission, and what the read found left (that many pass on both limits
// together: the second drains faster than the first, and every spend and give-back moves both),
// against both GCRA models together (a reward gives back on each limit, never below now), each
// limit's readings floored to its tick; one live copy of the key. Refusals are not judged: a decision
// whose undo met a give-back keeps its first commit (the key is charged for a request it did not
// admit), which the exact model cannot place.
import { allOf, callsOf, gcraModel, linearizable } from '../models.mjs';
import { liveCopies, tableNames, timeMoves } from './common.mjs';
import { tickEarly } from './_windows.mjs';

const perMinute = { permits: 1, periodMs: 60_000, burst: 1 };
const perSecond = { permits: 10, periodMs: 1000, burst: 1 };
const time = timeMoves({ startMs: 4999.75, tickMs: 1e-5, intervalMs: 100 });

export default {
  name: 'limits-give-back',
  what: 'a reward on two GCRA limits (LockFreeEngine.giveBack) racing decisions and their undo',
  time,
  // A third of the usual CI budget keeps npm run explore within its 3 minutes.
  bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: [lib.perMinute(1), lib.perSecond(10, { burst: 1 })], maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.penalty('k', 1); // set-up: the key is in the table, and fresh again
      rl.reset('k');
      ctx.ready();
      ctx.call('reward', () => rl.reward('k', 1)?.remaining ?? null);
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
      ctx.call('left', () => rl.tryAcquire('k', 0).limits?.[0]?.remaining ?? null);
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    const outcome = (c) => {
      if (c.label === 'allow') return { key: 'k', cost: 1, admitted: c.result === true };
      if (c.label === 'reward') return { key: 'k', cost: 1, admitted: true, op: 'reward' };
      if (c.label === 'left') return { key: 'k', cost: 0, admitted: true, remaining: c.result };
      return null;
    };
    // Each limit floors readings to its own tick: 1 us per minute, 10 ns per second.
    const model = allOf(tickEarly(gcraModel(perMinute, { refusalSlackMs: 2e-3 }), 1e-3), tickEarly(gcraModel(perSecond, { refusalSlackMs: 2e-5 }), 1e-5));
    return liveCopies(exec.buffers[0], lib, ['k'])
      ?? linearizable(callsOf(exec), model, outcome, { since: exec.startMs, judgeRefusals: false });
  },
};
