// GCRA at width 32 on the one-limit path (Gcra32), on a key that holds one admission already: one
// thread checks it twice (its second check starts from its own last write), the other once (from a
// load). Checked: the admissions and refusals against the exact model, with the set-up's admission.
import { gcraModel } from '../models.mjs';
import { gcraOutcome, liveCopies, tableNames, timeMoves } from './common.mjs';

const limit = { permits: 2, periodMs: 1000, burst: 2 };

export default {
  name: 'gcra-32-decide',
  what: 'Gcra32 decide: the own-write path, the load loop, lastSec across a second edge, a wrap, a step back',
  time: timeMoves({ startMs: 4999.75, tickMs: 1e-5, intervalMs: 500, wrapMs: 2 ** 31 * 1e-5 }),
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(2), maxKeys: 4, hashSeed: 7 });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [
    (ctx, { handle }, lib) => {
      const rl = lib.RateLimiter.attach(handle);
      ctx.call('allow', () => rl.allow('k')); // set-up: the key exists and holds one admission
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
    return liveCopies(exec.buffers[0], lib, ['k']) ?? gcraOutcome(exec, gcraModel(limit, { refusalSlackMs: 1e-5 }));
  },
};
