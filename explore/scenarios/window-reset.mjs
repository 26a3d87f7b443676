// reset on a key of two fixed windows (LockFreeEngine.reset: every limit written fresh from one
// snapshot, each once, under the key's give-back guard: rate/give-back-guard.ts) racing decisions
// that commit the first window and take it back when the second now refuses. The set-up admits
// the key once: the first window (1 a second) is full, the second (2 a minute) has one left.
// Thread 0 resets the key; threads 1 and 2 spend it (three checks in all). The schedule this is
// for: the reset writes the first window fresh, a check sees it so and is admitted, taking the
// second window's last place before the reset writes it; the reset, which lost that race, must
// not clear the check's spends (a third check would then pass). Checked: every admission against both fixed-window models
// together (a reset makes the key fresh in each), one live copy of the key. Refusals are not
// judged: a decision whose take-back met the reset keeps its first commit, and a reset that lost
// a limit's race to a decision gives nothing back there (both conservative).
import { allOf, callsOf, linearizable } from '../models.mjs';
import { liveCopies, tableNames, timeMoves } from './common.mjs';
import { fixedWindowModel } from './_windows.mjs';

const perSecond = { permits: 1, periodMs: 1000 };
const perMinute = { permits: 2, periodMs: 60_000 };
const START_MS = 4999.75;

export default {
  name: 'window-reset',
  what: 'reset on two fixed windows (LockFreeEngine.reset) racing decisions and their take-back',
  time: timeMoves({ startMs: START_MS, tickMs: 1e-5, intervalMs: 1000 }),
  // A third of the usual CI budget keeps npm run explore within its 3 minutes.
  bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: [lib.perSecond(1), lib.perMinute(2)], algorithm: 'fixed-window', maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.allow('k'); // set-up, at START_MS
      ctx.ready();
      ctx.call('reset', () => rl.reset('k'));
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
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    const outcome = (c) => {
      if (c.label === 'allow') return { key: 'k', cost: 1, admitted: c.result === true };
      if (c.label === 'reset') return { key: 'k', cost: 0, admitted: true, op: 'reset' };
      return null;
    };
    // The set-up's admission comes first, at START_MS.
    const calls = [{ label: 'allow', readings: [START_MS], firstStep: -2, lastStep: -1, result: true, thread: 0, index: -1 }, ...callsOf(exec)];
    return liveCopies(exec.buffers[0], lib, ['k'])
      ?? linearizable(calls, allOf(fixedWindowModel(perSecond), fixedWindowModel(perMinute)), outcome, { since: exec.startMs, judgeRefusals: false });
  },
};
