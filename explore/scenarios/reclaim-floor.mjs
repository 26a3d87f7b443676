// A key reclaimed at one reading and inserted again at an earlier one (table/reclaim-floor.ts).
// The fixed window in one int32 word, one permit per 1000 ms window: thread 0 spends the window's
// permit in its set-up (at 4999.75 ms) and checks the key again; thread 1 sweeps, then checks
// the key. The schedule this is for (two clock moves, deep mode): the clock moves to the window's
// edge, thread 1's sweep reclaims the key (its window has ended), the clock steps back by a tick,
// and thread 0 inserts the key again at 4999.99999 ms. Without the floor that insert was fresh in
// the first window, and thread 1's check at 5000 ms then found the second window empty: two
// admissions where the exact order allows one (deep run of 2026-12-06 on fixed-window, schedule
// 0:1 32:1 40:2 66:4). With it, thread 0 decides at the sweep's reading, in the second window.
// Checked: admissions against the exact fixed-window model (_windows.mjs), judged at readings
// the calls made, the sweep's included (a later call may be judged at it); refusals too, where no
// key was reclaimed under a call (as fixed-window.mjs); one live copy of the key.
import { callsOf, linearizable } from '../models.mjs';
import { liveCopies, reclaimedUnderCall, tableNames, timeMoves } from './common.mjs';
import { fixedWindowModel } from './_windows.mjs';

const limit = { permits: 1, periodMs: 1000 };
const START_MS = 4999.75;

export default {
  name: 'reclaim-floor',
  what: 'a key reclaimed by a sweep, inserted again by a thread whose clock reads earlier (the reclaim floor)',
  time: timeMoves({ startMs: START_MS, tickMs: 1e-5, intervalMs: 1000 }),
  // A third of the usual CI budget keeps npm run explore within its 3 minutes; the schedule it
  // is for needs two clock moves (deep mode), which test/explore/explorer.test.ts replays.
  bounds: { ci: { dfsBudgetMs: 3_000, pctBudgetMs: 500 } },
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(1), algorithm: 'fixed-window', maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      rl.allow('k'); // set-up, at START_MS: the window's one permit
      ctx.ready();
      ctx.call('allow', () => rl.allow('k'));
    },
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('sweep', () => rl.sweep());
      ctx.call('allow', () => rl.allow('k'));
    },
  ],
  names: tableNames,
  check(exec, lib) {
    // The set-up's admission comes first, at START_MS.
    const calls = [{ label: 'allow', readings: [START_MS], firstStep: -2, lastStep: -1, result: true, thread: 0, index: -1 }, ...callsOf(exec)];
    const outcome = (c) => (c.label === 'allow' ? { key: 'k', cost: 1, admitted: c.result === true } : null);
    // Refusals are judged only where no call had its key reclaimed under it (a decision that
    // lands in the key's next incarnation keeps that spend: conservative, docs/testing.md).
    return liveCopies(exec.buffers[0], lib, ['k'])
      ?? linearizable(calls, fixedWindowModel(limit), outcome, { judgeRefusals: !reclaimedUnderCall(exec, lib) });
  },
};
