// GCRA at width 32 on the one-limit path (Gcra32), on a key that is new: two threads check it at
// once, so their inserts race (claim, re-scan, publish) before their decisions do. Checked: the
// admissions and refusals against the exact model, and one live copy of the key.
import { gcraModel } from '../models.mjs';
import { countersAgree, gcraOutcome, liveCopies, tableNames, timeMoves } from './common.mjs';

const limit = { permits: 1, periodMs: 1000, burst: 1 };

export default {
  name: 'gcra-32-insert',
  what: 'Table insert (claim, re-scan, cancel, publish) racing on one new key, then Gcra32 decide',
  time: timeMoves({ startMs: 4999.75, tickMs: 1e-5, intervalMs: 1000, wrapMs: 2 ** 31 * 1e-5 }),
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(1), maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.ready();
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
    return liveCopies(exec.buffers[0], lib, ['k']) ?? countersAgree(exec.buffers[0], lib) ?? gcraOutcome(exec, gcraModel(limit, { refusalSlackMs: 1e-5 }));
  },
};
