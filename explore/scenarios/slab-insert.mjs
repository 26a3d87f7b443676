// The SLAB layout's insert (src/table/slab-directory.ts) racing on one new key: two threads check it
// at once, so their inserts race (claim a slot, place an directory entry, re-scan the chain, publish)
// before their decisions do. Checked: the admissions and refusals against the exact model, one
// live copy of the key reachable through one directory entry, and the counters.
import { gcraModel } from '../models.mjs';
import { brokenChains, countersAgree, gcraOutcome, liveCopies, tableNames, timeMoves } from './common.mjs';

const limit = { permits: 1, periodMs: 1000, burst: 1 };

export default {
  name: 'slab-insert',
  what: 'SLAB insert (claim a slot, place the entry, re-scan, publish) racing on one new key, then Gcra32 decide',
  time: timeMoves({ startMs: 4999.75, tickMs: 1e-5, intervalMs: 1000 }),
  setup(lib) {
    const rl = new lib.RateLimiter({ limit: lib.perSecond(1), maxKeys: 4, hashSeed: 7, [Symbol.for('sluice.layout')]: 'slab' });
    return { buffers: [rl.handle.table], data: { handle: rl.handle } };
  },
  threads: [0, 1].map(() => (ctx, { handle }, lib) => {
    const rl = lib.RateLimiter.attach(handle);
    ctx.ready();
    ctx.call('allow', () => rl.allow('k'));
  }),
  names: tableNames,
  check(exec, lib) {
    return liveCopies(exec.buffers[0], lib, ['k']) ?? brokenChains(exec.buffers[0], lib) ?? countersAgree(exec.buffers[0], lib)
      ?? gcraOutcome(exec, gcraModel(limit, { refusalSlackMs: 1e-5 }));
  },
};
