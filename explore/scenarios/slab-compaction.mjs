// The SLAB layout's sweep (src/table/slab-sweep.ts: reclaim, clear the freed slot's entry,
// compact the directory) against two inserts of the same key across the entries it clears. As
// compaction-duplicates.mjs, on a SLAB table (its clock moves inside the reuse age: slabTime):
// four slots, every key hashing alike, 'a' idle (admitted 100 s before the run); thread 0 sweeps, threads 1 and 2 each check 'b' once.
import { compactionCheck, compactionSetup, SLAB, slabLimit, slabTime } from './_compaction.mjs';
import { tableNames } from './common.mjs';

export default {
  name: 'slab-compaction',
  what: 'a SLAB sweep clearing entries and compacting the directory while two threads insert the same key',
  time: slabTime,
  bounds: { ci: { dfsBudgetMs: 4_000, pctBudgetMs: 1_000 } },
  setup: compactionSetup('slab-compaction', SLAB, slabLimit),
  threads: [0, 1, 2].map((t) => (ctx, { handle }, lib) => {
    const rl = lib.RateLimiter.attach(handle, { clock: lib.monotonicClock });
    ctx.ready();
    if (t === 0) ctx.call('sweep', () => rl.sweep());
    else ctx.call('b', () => rl.allow('b'));
  }),
  names: tableNames,
  check: (exec, lib) => compactionCheck(exec, lib, slabLimit),
};
