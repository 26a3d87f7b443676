// A penalty on a key of two fixed windows (LockFreeEngine.forceGuarded: each window's count raised
// by the penalty, a fixed window's at most to its permits, under the key's give-back guard with
// the epoch moved on after it) racing decisions that commit the first window and take it back
// when the second now refuses. The set-up admits the key once: the first window (3 a minute) and
// the second (2 a minute) each hold one. Thread 0 penalizes the key by 1; thread 1 spends it,
// then reads what the first window has left (tryAcquire of cost 0); thread 2 spends it. The
// schedule this is for: thread 1 commits the first window, thread 2 is admitted on both (both
// full now), the penalty adds nothing past their permits, thread 1's second window refuses and it
// takes back its first; a take-back that subtracted from the count the penalty left full would
// leave the first window a place the exact order (the penalty fills it) does not have. Checked:
// every admission against both fixed-window models together, the read against the first one's
// alone, one live copy of the key. Refusals are not judged: a decision whose take-back met the
// penalty keeps its first commit (conservative), which the exact model cannot place.
import { allOf, callsOf, linearizable } from '../models.mjs';
import { liveCopies, tableNames, timeMoves } from './common.mjs';
import { fixedWindowModel } from './_windows.mjs';

const first = { permits: 3, periodMs: 60_000 };
const second = { permits: 2, periodMs: 60_000 };
const START_MS = 4999.75;

/** Both windows for the spends; the first alone for a read of its own remaining (`o.first`). */
function model() {
  const both = allOf(fixedWindowModel(first), fixedWindowModel(second));
  const one = fixedWindowModel(first);
  return {
    init: () => both.init(),
    judge(state, o, reading) {
      if (!o.first) return both.judge(state, o, reading);
      const j = one.judge(state[0], o, reading);
      return { admit: j.admit, refuses: j.refuses, next: state };
    },
  };
}

export default {
  name: 'window-penalty',
  what: 'a penalty on two fixed windows (LockFreeEngine.forceGuarded) racing decisions and their take-back',
  time: timeMoves({ startMs: START_MS, tickMs: 1e-5, intervalMs: 1000 }),
  // A third of the usual CI budget keeps npm run explore within its 3 minutes.
  bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: [lib.perMinute(3), lib.perMinute(2)], algorithm: 'fixed-window', maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.allow('k'); // set-up, at START_MS
      ctx.ready();
      ctx.call('penalty', () => rl.penalty('k', 1).remaining);
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
      if (c.label === 'penalty') return { key: 'k', cost: 1, admitted: true, op: 'penalty' };
      if (c.label === 'left') return { key: 'k', cost: 0, admitted: true, remaining: c.result, first: true };
      return null;
    };
    // The set-up's admission comes first, at START_MS.
    const calls = [{ label: 'allow', readings: [START_MS], firstStep: -2, lastStep: -1, result: true, thread: 0, index: -1 }, ...callsOf(exec)];
    return liveCopies(exec.buffers[0], lib, ['k'])
      ?? linearizable(calls, model(), outcome, { since: exec.startMs, judgeRefusals: false });
  },
};
