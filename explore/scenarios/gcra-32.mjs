// GCRA at width 32 on the one-limit path (Gcra32): two threads check one key, the first of them
// twice; the key is new, so its insert races too. Checked: the admissions and refusals against
// the exact model, and one live copy of the key.
import { gcraModel } from '../models.mjs';
import { gcraOutcome, liveCopies, tableWordNames, timeMoves } from './common.mjs';

const limit = { permits: 2, periodMs: 1000, burst: 2 };

export default {
  name: 'gcra-32',
  what: 'Gcra32 decide (own-write path and load loop), the first insert of a key',
  time: timeMoves({ startMs: 4999.75, tickMs: 1e-5, intervalMs: 500, wrapMs: 2 ** 31 * 1e-5 }),
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(2), maxKeys: 4, hashSeed: 7 });
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
  ],
  names: (buffers, lib) => { const table = tableWordNames(buffers[0], lib); return (buf, byte) => (buf === 0 ? table(byte) : `buffer ${buf} byte ${byte}`); },
  check(exec, lib) {
    return liveCopies(exec.buffers[0], lib, ['k']) ?? gcraOutcome(exec, gcraModel(limit, { refusalSlackMs: 1e-5 }));
  },
};
