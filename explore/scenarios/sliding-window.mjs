// The sliding window (two-window estimate, one 64-bit word) on the lock-free engine, with
// sweep() reclaiming the key. Two permits per 1000 ms; thread 0 checks the key twice, thread 1
// once, thread 2 sweeps. The clock may move to the window's edge (the current count becomes the
// previous one, weighted by the part of it the last period still overlaps) or back.
// Checked: admissions and refusals against the exact sliding-window model (_windows.mjs), judged
// at readings the calls made (admissions only where the key was reclaimed under a call, see
// reclaimedUnderCall); one live copy of the key.
import { callsOf, linearizable } from '../models.mjs';
import { liveCopies, reclaimedUnderCall, tableNames, timeMoves } from './common.mjs';
import { slidingWindowModel } from './_windows.mjs';

const limit = { permits: 2, periodMs: 1000 };

export default {
  name: 'sliding-window',
  what: 'sliding window decide (64-bit compareExchange of both counts and the window) and the reclaim idle test, with sweep',
  time: timeMoves({ startMs: 4999.75, tickMs: 1e-5, intervalMs: 1000 }),
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(2), algorithm: 'sliding-window', maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
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
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
      ctx.call('sweep', () => rl.sweep());
    },
  ],
  names: tableNames,
  check(exec, lib) {
    const outcome = (c) => (c.label === 'allow' ? { key: 'k', cost: 1, admitted: c.result === true } : null);
    return liveCopies(exec.buffers[0], lib, ['k'])
      ?? linearizable(callsOf(exec), slidingWindowModel(limit), outcome, { judgeRefusals: !reclaimedUnderCall(exec, lib) });
  },
};
